//! Where and at what I/O priority a job's thread runs: fio's `numa_cpu_nodes`,
//! `numa_mem_policy`, `prioclass` and `prio`.
//!
//! fio applies them in its job thread before it allocates its buffers (backend.c
//! `thread_main`): first `cpus_allowed` (the engine's pin), then `numa_cpu_nodes`, which
//! replaces the affinity with the CPUs of the nodes (libnuma's `numa_run_on_node_mask`),
//! then `numa_mem_policy` (`set_mempolicy(2)` for the thread), then `ioprio_set(2)` with
//! `prioclass` and `prio` (class 0 means best-effort, as fio's `ioprio_value`). Here the
//! same happens in the same order, by raw system calls (no libnuma): node CPUs come from
//! `/sys/devices/system/node/nodeN/cpulist`.
//!
//! A node that does not exist is refused when the job file is read, as fio refuses it
//! (`numa_parse_nodestring failed`).

use std::path::Path;

/// The sysfs directory of NUMA nodes.
const NODE_DIR: &str = "/sys/devices/system/node";

/// `ioprio_set(2)`'s `IOPRIO_WHO_PROCESS` (with who = 0: the calling thread).
const IOPRIO_WHO_PROCESS: libc::c_int = 1;
/// The I/O priority class's shift in an I/O priority value.
pub const IOPRIO_CLASS_SHIFT: u32 = 13;
/// The real-time I/O priority class.
pub const IOPRIO_CLASS_RT: u16 = 1;
/// The best-effort I/O priority class.
pub const IOPRIO_CLASS_BE: u16 = 2;

/// `numa_mem_policy`: the memory policy of the job's thread (`set_mempolicy(2)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemPolicy {
    /// `default`: the system's default policy.
    Default,
    /// `prefer:N`: allocate on node N first.
    Prefer(u32),
    /// `bind:LIST`: allocate only on these nodes.
    Bind(Vec<u32>),
    /// `interleave[:LIST]`: spread pages over these nodes (none given: every node with
    /// memory).
    Interleave(Vec<u32>),
    /// `local`: allocate on the node of the CPU that faults the page.
    Local,
}

/// fio's NUMA and I/O priority options of one job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// `numa_cpu_nodes`: the job runs on the CPUs of these nodes.
    pub cpu_nodes: Option<Vec<u32>>,
    /// `numa_mem_policy`.
    pub mem_policy: Option<MemPolicy>,
    /// `prioclass` (0 to 3).
    pub prioclass: Option<u16>,
    /// `prio` (0 to 7).
    pub prio: Option<u16>,
}

impl Placement {
    /// The I/O priority value fio gives the job (`ioprio_value`): class 0 is
    /// best-effort; `None` when neither `prioclass` nor `prio` is set.
    pub fn ioprio(&self) -> Option<u16> {
        if self.prioclass.is_none() && self.prio.is_none() {
            return None;
        }
        let class = match self.prioclass.unwrap_or(0) {
            0 => IOPRIO_CLASS_BE,
            c => c,
        };
        Some(class << IOPRIO_CLASS_SHIFT | self.prio.unwrap_or(0))
    }

    /// Applies the options to the calling thread, in fio's order; the error names what
    /// failed.
    pub fn apply(&self) -> Result<(), String> {
        if let Some(nodes) = &self.cpu_nodes {
            let mut cpus = Vec::new();
            for &n in nodes {
                let list = std::fs::read_to_string(Path::new(NODE_DIR).join(format!("node{n}/cpulist")))
                    .map_err(|e| format!("numa_cpu_nodes: read the CPUs of node {n}: {e}"))?;
                cpus.extend(
                    parse_list(list.trim())
                        .ok_or_else(|| format!("numa_cpu_nodes: node {n}'s cpulist {list:?} is not a CPU list"))?,
                );
            }
            if cpus.is_empty() {
                return Err(format!("numa_cpu_nodes: nodes {nodes:?} have no CPUs"));
            }
            set_affinity(&cpus).map_err(|e| format!("numa_cpu_nodes: sched_setaffinity: {e}"))?;
        }
        if let Some(p) = &self.mem_policy {
            set_mempolicy(p).map_err(|e| format!("numa_mem_policy: set_mempolicy: {e}"))?;
        }
        if let Some(v) = self.ioprio() {
            // SAFETY: ioprio_set takes three integers and touches no memory of ours.
            let r = unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, libc::c_int::from(v)) };
            if r != 0 {
                let e = std::io::Error::last_os_error();
                let hint = if v >> IOPRIO_CLASS_SHIFT == IOPRIO_CLASS_RT && e.raw_os_error() == Some(libc::EPERM) {
                    " (the real-time class needs CAP_SYS_ADMIN or CAP_SYS_NICE)"
                } else {
                    ""
                };
                return Err(format!("prioclass/prio: ioprio_set(class {}, level {}): {e}{hint}", v >> 13, v & 7));
            }
        }
        Ok(())
    }
}

/// The calling thread's I/O priority value (`ioprio_get(2)`).
pub fn thread_ioprio() -> std::io::Result<u16> {
    // SAFETY: ioprio_get takes two integers and touches no memory of ours.
    let r = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(r as u16)
}

/// The calling thread's CPUs (`sched_getaffinity(2)`).
pub fn thread_cpus() -> std::io::Result<Vec<u32>> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes inside it, CPU_ISSET reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).map(|c| c as u32).collect())
    }
}

fn set_affinity(cpus: &[u32]) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it (cpus past CPU_SETSIZE are
    // skipped); sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| (c as usize) < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c as usize, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Node masks up to this many nodes (the kernel's usual MAX_NUMNODES is 1024 at most).
const MASK_WORDS: usize = 1024 / 64;

fn set_mempolicy(p: &MemPolicy) -> std::io::Result<()> {
    // linux/mempolicy.h modes.
    let (mode, nodes): (libc::c_int, Vec<u32>) = match p {
        MemPolicy::Default => (0, vec![]),
        MemPolicy::Prefer(n) => (1, vec![*n]),
        MemPolicy::Bind(v) => (2, v.clone()),
        MemPolicy::Interleave(v) if v.is_empty() => (3, nodes_with_memory()?),
        MemPolicy::Interleave(v) => (3, v.clone()),
        MemPolicy::Local => (4, vec![]),
    };
    let mut mask = [0u64; MASK_WORDS];
    for n in nodes {
        let n = n as usize;
        if n >= MASK_WORDS * 64 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("node {n} is past the node mask"),
            ));
        }
        mask[n / 64] |= 1 << (n % 64);
    }
    let (ptr, maxnode) =
        if mode == 0 || mode == 4 { (std::ptr::null(), 0usize) } else { (mask.as_ptr(), MASK_WORDS * 64 + 1) };
    // SAFETY: the mask holds MASK_WORDS * 64 bits, which maxnode - 1 does not exceed; the
    // kernel only reads it; a null mask with maxnode 0 is what MPOL_DEFAULT/LOCAL take.
    let r = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, ptr, maxnode) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn nodes_with_memory() -> std::io::Result<Vec<u32>> {
    let s = std::fs::read_to_string(Path::new(NODE_DIR).join("has_memory"))?;
    parse_list(s.trim()).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, format!("has_memory {s:?} is not a node list"))
    })
}

/// The calling thread's memory policy mode and nodes (`get_mempolicy(2)`), for tests.
pub fn thread_mempolicy() -> std::io::Result<(i32, Vec<u32>)> {
    let mut mode: libc::c_int = 0;
    let mut mask = [0u64; MASK_WORDS];
    // SAFETY: mode and mask are ours and large enough for maxnode bits; addr null with
    // flags 0 asks for the thread's policy.
    let r = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut libc::c_int,
            mask.as_mut_ptr(),
            MASK_WORDS * 64,
            std::ptr::null::<libc::c_void>(),
            0,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let nodes = (0..MASK_WORDS * 64).filter(|&n| mask[n / 64] >> (n % 64) & 1 == 1).map(|n| n as u32).collect();
    Ok((mode, nodes))
}

/// A list such as `0-1,3` (sysfs's and fio's node list syntax), sorted and deduplicated;
/// `None` when it is not one.
pub fn parse_list(s: &str) -> Option<Vec<u32>> {
    parse_list_below(s, 1 << 16)
}

/// [`parse_list`] of numbers below `limit` (`None` where one is not).
pub fn parse_list_below(s: &str, limit: u32) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for item in s.split(',') {
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?),
            None => {
                let n = item.trim().parse::<u32>().ok()?;
                (n, n)
            }
        };
        if lo > hi || hi >= limit {
            return None;
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// CPUs this machine is configured with, as fio counts them for `cpus_allowed`
/// (`sysconf(_SC_NPROCESSORS_CONF)`): one past the highest of
/// `/sys/devices/system/cpu/possible`; `None` where that file cannot be read.
pub fn configured_cpus() -> Option<u32> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible").ok()?;
    parse_list(s.trim())?.into_iter().max().map(|m| m + 1)
}

/// The nodes this machine has (`/sys/devices/system/node/online`; a machine without that
/// file, a kernel without NUMA, has node 0 only).
pub fn online_nodes() -> Vec<u32> {
    std::fs::read_to_string(Path::new(NODE_DIR).join("online"))
        .ok()
        .and_then(|s| parse_list(s.trim()))
        .unwrap_or_else(|| vec![0])
}

/// A node list as fio's `numa_cpu_nodes` and `numa_mem_policy` take it (`0-1,3`, or
/// `all`: every online node), checked against `online`; the error says what is wrong.
pub fn parse_nodes(s: &str, online: &[u32]) -> Result<Vec<u32>, String> {
    if s.trim() == "all" {
        return Ok(online.to_vec());
    }
    let nodes = parse_list(s).ok_or_else(|| "a node list such as 0, 0-1 or 0,2, or all".to_string())?;
    if let Some(n) = nodes.iter().find(|n| !online.contains(n)) {
        return Err(format!(
            "a node list of this machine's nodes ({}); node {n} does not exist",
            online.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        ));
    }
    Ok(nodes)
}

/// fio's `numa_mem_policy` value: `default`, `prefer:N`, `bind:LIST`,
/// `interleave[:LIST]` or `local` (fio's rules: `prefer` takes one node, `bind` a list,
/// `default` and `local` none).
pub fn parse_mem_policy(s: &str, online: &[u32]) -> Result<MemPolicy, String> {
    let (mode, list) = match s.split_once(':') {
        Some((m, l)) => (m.trim(), Some(l.trim())),
        None => (s.trim(), None),
    };
    const EXPECT: &str = "default, prefer:NODE, bind:NODES, interleave[:NODES] or local";
    Ok(match (mode, list) {
        ("default", None) => MemPolicy::Default,
        ("local", None) => MemPolicy::Local,
        ("default" | "local", Some(_)) => return Err(format!("{EXPECT} ({mode} takes no node list)")),
        ("prefer", Some(l)) => match parse_nodes(l, online)?.as_slice() {
            [n] if !l.contains(['-', ',']) && l != "all" => MemPolicy::Prefer(*n),
            _ => return Err(format!("{EXPECT} (prefer takes one node)")),
        },
        ("prefer", None) => return Err(format!("{EXPECT} (prefer needs a node)")),
        ("bind", Some(l)) => MemPolicy::Bind(parse_nodes(l, online)?),
        ("bind", None) => return Err(format!("{EXPECT} (bind needs a node list)")),
        ("interleave", Some(l)) => MemPolicy::Interleave(parse_nodes(l, online)?),
        ("interleave", None) => MemPolicy::Interleave(vec![]),
        _ => return Err(EXPECT.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_lists_are_checked_against_the_machines_nodes() {
        assert_eq!(parse_nodes("0-1,3", &[0, 1, 2, 3]), Ok(vec![0, 1, 3]));
        assert_eq!(parse_nodes("all", &[0, 1]), Ok(vec![0, 1]));
        let e = parse_nodes("0-1", &[0]).unwrap_err();
        assert!(e.contains("node 1 does not exist"), "{e}");
        assert!(parse_nodes("x", &[0]).unwrap_err().contains("node list"));
        assert!(parse_nodes("2-1", &[0, 1, 2]).is_err());
    }

    #[test]
    fn mem_policies_follow_fios_rules() {
        let on = [0, 1];
        assert_eq!(parse_mem_policy("bind:0", &on), Ok(MemPolicy::Bind(vec![0])));
        assert_eq!(parse_mem_policy("interleave:0-1", &on), Ok(MemPolicy::Interleave(vec![0, 1])));
        assert_eq!(parse_mem_policy("interleave", &on), Ok(MemPolicy::Interleave(vec![])));
        assert_eq!(parse_mem_policy("prefer:1", &on), Ok(MemPolicy::Prefer(1)));
        assert_eq!(parse_mem_policy("local", &on), Ok(MemPolicy::Local));
        assert_eq!(parse_mem_policy("default", &on), Ok(MemPolicy::Default));
        assert!(parse_mem_policy("prefer:0-1", &on).unwrap_err().contains("one node"));
        assert!(parse_mem_policy("prefer", &on).unwrap_err().contains("needs a node"));
        assert!(parse_mem_policy("bind", &on).unwrap_err().contains("needs a node list"));
        assert!(parse_mem_policy("local:0", &on).unwrap_err().contains("no node list"));
        assert!(parse_mem_policy("bind:2", &on).unwrap_err().contains("node 2 does not exist"));
        assert!(parse_mem_policy("spread", &on).is_err());
    }

    #[test]
    fn ioprio_value_is_fios() {
        let p = |c, l| Placement { prioclass: c, prio: l, ..Default::default() }.ioprio();
        assert_eq!(p(None, None), None);
        assert_eq!(p(Some(3), None), Some(3 << 13));
        assert_eq!(p(Some(0), Some(7)), Some(2 << 13 | 7), "class 0 is best-effort, as fio's ioprio_value");
        assert_eq!(p(None, Some(4)), Some(2 << 13 | 4));
        assert_eq!(p(Some(1), Some(1)), Some(1 << 13 | 1));
    }

    #[test]
    fn a_node_without_cpus_list_is_an_error_naming_the_option() {
        let e = std::thread::spawn(|| Placement { cpu_nodes: Some(vec![65000]), ..Default::default() }.apply())
            .join()
            .expect("thread");
        assert!(e.as_ref().is_err_and(|e| e.starts_with("numa_cpu_nodes: read the CPUs of node 65000")), "{e:?}");
    }

    /// The kernel sees what was applied: a thread of its own, so the test's thread keeps
    /// its settings.
    #[test]
    fn apply_sets_the_threads_ioprio_affinity_and_mempolicy() {
        let node0 = online_nodes()[0];
        let cpulist = format!("{NODE_DIR}/node{node0}/cpulist");
        let Some(want) = std::fs::read_to_string(&cpulist).ok().and_then(|s| parse_list(s.trim())) else {
            eprintln!("skipped: no {cpulist} (a kernel without NUMA)");
            return;
        };
        std::thread::spawn(move || {
            let p = Placement {
                cpu_nodes: Some(vec![node0]),
                mem_policy: Some(MemPolicy::Bind(vec![node0])),
                prioclass: Some(3),
                prio: None,
            };
            p.apply().expect("apply");
            assert_eq!(thread_ioprio().expect("ioprio_get"), 3 << 13, "idle class");
            assert_eq!(thread_cpus().expect("sched_getaffinity"), want);
            assert_eq!(thread_mempolicy().expect("get_mempolicy"), (2, vec![node0]), "MPOL_BIND to node 0");
            let p = Placement { prioclass: Some(2), prio: Some(5), ..Default::default() };
            p.apply().expect("apply");
            assert_eq!(thread_ioprio().expect("ioprio_get"), 2 << 13 | 5);
        })
        .join()
        .expect("the thread's checks");
    }
}
