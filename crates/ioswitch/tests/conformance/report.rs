//! The report after the cells: the matrix, what the columns and checks mean, every failure,
//! skip and n/a with its reason, and the totals.

use crate::rows::{Col, Row};
use crate::runner::{CellState, Results, FAILS, TALLY};
use crate::{DEV_BYTES, KIB, TAIL_BYTES};
use ioswitch_testkit::lock;
use std::fmt::Write as _;
use std::time::Instant;

/// Prints the report of `results` over `rows` (`teardown`: what went wrong detaching the
/// loop device, counted as one more failure; `t0`: when the run began). Returns whether
/// anything failed.
pub(crate) fn print(rows: &[Row], results: &Results, teardown: Option<String>, t0: Instant) -> bool {
    for group in [&Col::ALL[..], &Col::NVME[..], &Col::ZONED[..]] {
        let members: Vec<usize> = (0..rows.len()).filter(|&ri| rows[ri].kind.cols() == group).collect();
        if members.is_empty() {
            continue;
        }
        println!();
        print!("{:<30}", "device \\ interface");
        for c in group {
            print!(" {:<9}", c.label());
        }
        println!();
        for ri in members {
            print!("{:<30}", rows[ri].label);
            for ci in 0..group.len() {
                let s = results.get(&(ri, ci)).map_or("?", |c| c.state.label());
                print!(" {s:<9}");
            }
            println!();
        }
    }
    let mut used: Vec<Col> = Vec::new();
    for row in rows {
        for &c in row.kind.cols() {
            if !used.contains(&c) {
                used.push(c);
            }
        }
    }
    let legend: Vec<String> = used.iter().map(|c| format!("{} = {}", c.label(), c.opts())).collect();
    println!("column options (rows named direct add direct=1): {}", legend.join("; "));
    println!(
        "columns: sync interfaces psync/block/ramdisk/nvme run through Device::pass (opened with async=emu); \
         nil runs queue-semantics cases only; +sqp / +iop cells also check that the tunable is in effect \
         (a new iou-sqp kernel thread per sqpoll queue; iopoll reads raise no interrupt on the controller's \
         I/O queues, compared with the same reads without iopoll)"
    );
    println!(
        "trim: file-set trim, DSM deallocate and write zeroes must read back zeroes on every file and loop row (the loop device \
         sits on a file, so BLKDISCARD punches holes in it and reads zero); errno-map: writes on rdonly=1, reads on \
         wronly=1, and a read past the end of a file that shrank under the device (files: an OS error, EIO)"
    );
    if rows.iter().any(|r| r.kind.nvme()) {
        println!(
            "NVMe: whole-range passes cover the first {} KiB and the last {} KiB of each namespace; deallocated \
             blocks (trim, DSM, zone reset) must read back what Identify Namespace DLFEAT says; write zeroes reads \
             zeroes; the block device read and written with O_DIRECT is the independent witness of every NVMe row; \
             passthrough cells (nvme, uring_cmd, and emu/thrpool on char devices) refuse or fail (EINVAL) file-set \
             I/O that is not whole LBAs",
            DEV_BYTES / KIB,
            TAIL_BYTES / KIB
        );
    }
    if rows.iter().any(|r| r.kind.dev_kind() == ioswitch::DevKind::NvmePci) {
        println!(
            "PCI rows (vfio): the namespaces of a controller bound to vfio-pci, by PCI address and nsid=; only vfio \
             may open them (every other column must be refused naming itself); vfio is refused on every other row; \
             buffers are the device's DMA memory (Device::alloc); no kernel device witnesses the data: the reads \
             through the driver check it; LBA size, size, zones and DLFEAT come from the kernel's view before the \
             bind (IOSWITCH_VFIO_NS)"
        );
    }
    if rows.iter().any(|r| r.kind.zoned()) {
        println!(
            "zoned: each cell owns one zone; writes at the write pointer succeed and move it; writes past or \
             behind it fail (passthrough: Zone Invalid Write, SCT 1h SC BCh; block layer: EIO); zone append returns \
             the LBA it wrote (passthrough; the block layer has none: Invalid Command Opcode); finish makes the \
             zone full (writes: Zone Is Full / EIO); reset empties it (report: empty, write pointer at the start; \
             data reads back as DLFEAT says); the block-layer queues (libaio, io_uring, posix) refuse zone \
             management and zone append at submit (checked), so their cells manage zones through Device::pass"
        );
    }

    let mut others = String::new();
    for ((ri, ci), cell) in results {
        let at = format!("{} / {}", rows[*ri].label, rows[*ri].kind.cols()[*ci].label());
        match &cell.state {
            CellState::Skip(why) => {
                let _ = writeln!(others, "  skip {at}: {why}");
            }
            CellState::Na(why) => {
                let _ = writeln!(others, "  n/a  {at}: refused at open: {why}");
            }
            _ => {}
        }
    }
    if let Some(m) = &teardown {
        lock(&FAILS).push(format!("  FAIL loop device teardown: {m}"));
    }
    let fails = lock(&FAILS).clone();
    if !fails.is_empty() {
        println!();
        println!("Failures:");
        for l in &fails {
            println!("{l}");
        }
    }
    if !others.is_empty() {
        println!();
        println!("Skipped and n/a:");
        print!("{others}");
    }
    let (p, mut f, s) = *lock(&TALLY);
    if teardown.is_some() {
        f += 1;
    }
    println!();
    println!("conformance ran in {} ms", t0.elapsed().as_millis());
    println!("{p} passed, {f} failed, {s} skipped");
    f > 0
}
