//! The gate every cell passes first: the device opened is the one asked for.

use crate::ctx::Ctx;
use crate::{Res, KIB, QD};
use ioswitch::{Error, ZonedModel};
use ioswitch_testkit::lock;

/// The gate: the device is what was asked for, and (async) a queue can be made.
pub(crate) fn case_open(ctx: &Ctx) -> Res {
    let id = ctx.dev.ident();
    let g = ctx.dev.geometry();
    let want = ctx.row.dev_kind();
    ensure!(id.kind == want, "ident().kind is {:?}, expected {want:?}", id.kind);
    ensure!(g.bytes == ctx.bytes, "geometry().bytes is {}, expected {}", g.bytes, ctx.bytes);
    ensure!(g.lba_size >= 512 && g.lba_size.is_power_of_two(), "lba_size {} is not a power of two >= 512", g.lba_size);
    ensure!(ctx.bytes % g.lba_size as u64 == 0, "lba_size {} does not divide the device size", g.lba_size);
    ensure!(g.nlbas == g.bytes / g.lba_size as u64, "nlbas {} != bytes / lba_size", g.nlbas);
    let mut zones_note = String::new();
    if let Some(ns) = &ctx.ns {
        ensure!(id.nsid == ns.nsid, "ident().nsid is {}, but sysfs says namespace {}", id.nsid, ns.nsid);
        ensure!(g.lba_size as u64 == ns.lba, "lba_size {}, but sysfs says {}", g.lba_size, ns.lba);
        match (ctx.row.zoned(), g.zones) {
            (false, None) => {}
            (false, Some(z)) => return Err(format!("a conventional namespace reports zones: {z:?}")),
            (true, None) => return Err("the zoned namespace reports no zones".into()),
            (true, Some(z)) => {
                ensure!(g.zoned == ZonedModel::HostManaged, "zoned model {:?}, expected host-managed", g.zoned);
                ensure!(
                    (z.zone_size, z.nr_zones) == (ns.zone_lbas, ns.nr_zones),
                    "zones {z:?}; sysfs says {} zones of {} LBAs",
                    ns.nr_zones,
                    ns.zone_lbas
                );
                ensure!(
                    z.zone_capacity > 0 && z.zone_capacity <= z.zone_size,
                    "zone capacity {} of a zone of {} LBAs",
                    z.zone_capacity,
                    z.zone_size
                );
                zones_note = format!(
                    "; {} zones of {} KiB, capacity {} KiB",
                    z.nr_zones,
                    z.zone_size * ctx.lba / KIB,
                    z.zone_capacity * ctx.lba / KIB
                );
            }
        }
    }
    let o = ctx.dev.opts();
    ensure!(
        (o.sqpoll, o.iopoll, o.direct) == (ctx.col.sqpoll(), ctx.col.iopoll(), ctx.row.direct()),
        "opts() say sqpoll={} iopoll={} direct={}; the column asked for sqpoll={} iopoll={} direct={}",
        o.sqpoll,
        o.iopoll,
        o.direct,
        ctx.col.sqpoll(),
        ctx.col.iopoll(),
        ctx.row.direct()
    );
    if ctx.row.direct() {
        ensure!(
            g.dio_offset_align > 0 && g.lba_size % g.dio_offset_align == 0,
            "direct=1: lba_size {} is not a multiple of dio_offset_align {}",
            g.lba_size,
            g.dio_offset_align
        );
        ensure!(
            g.dio_mem_align > 0 && ctx.dev.buffer_align() % g.dio_mem_align as usize == 0,
            "buffer_align {} is not a multiple of dio_mem_align {}",
            ctx.dev.buffer_align(),
            g.dio_mem_align
        );
    }
    let ifs = ctx.dev.interfaces();
    if let Some(s) = ctx.col.sync() {
        ensure!(ifs.sync == Some(s), "interfaces().sync is {:?}, asked for {s:?}", ifs.sync);
    }
    ensure!(
        ifs.r#async == Some(ctx.col.async_iface()),
        "interfaces().async is {:?}, asked for {:?}",
        ifs.r#async,
        ctx.col.async_iface()
    );
    let b = ctx.alloc(8192)?;
    ensure!(b.len() == 8192 && b.iter().all(|&x| x == 0), "alloc(8192) is not 8192 zeroed bytes");
    ensure!(b.as_ptr() as usize % ctx.dev.buffer_align() == 0, "alloc() returned a buffer not aligned to buffer_align");
    if ctx.is_async() {
        let q = ctx.dev.queue(QD).map_err(|e| format!("dev.queue({QD}): {e}"))?;
        ensure!(
            q.capacity() == QD && q.outstanding() == 0,
            "a new queue has capacity {} / outstanding {}",
            q.capacity(),
            q.outstanding()
        );
        ensure!(q.interface() == ctx.col.async_iface(), "queue.interface() is {:?}", q.interface());
        *lock(&ctx.shared) = Some(q);
        for bad in [0, 4097] {
            match ctx.dev.queue(bad) {
                Err(Error::BadOpt { .. }) => {}
                Err(e) => return Err(format!("dev.queue({bad}): expected BadOpt, got {e}")),
                Ok(_) => return Err(format!("dev.queue({bad}) was accepted")),
            }
        }
    }
    Ok(format!("{} LBAs of {} B{zones_note}", g.nlbas, g.lba_size))
}
