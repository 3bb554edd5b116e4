//! Physical Region Page entries (NVMe base spec, "Physical Region Page Entry and List"):
//! how a transfer's memory is described to the controller.
//!
//! A transfer is a list of pieces of DMA memory (their device addresses and lengths).
//! PRP1 holds the first piece's address (any dword offset inside a page); every further
//! entry is a whole page. With one page that is all; with two, PRP2 is the second page;
//! with more, PRP2 points at a PRP list (one 4 KiB page of up to 512 entries here: no
//! chained lists, so at most 513 pages, which bounds the driver's max transfer).
//! So every piece but the first must start on a page, and every piece but the last must
//! end on one.

use super::mem::PAGE;

/// Most entries one PRP list page holds.
pub(crate) const LIST_ENTRIES: usize = PAGE / 8;
/// Most pages one command may touch: PRP1 plus a full list.
pub(crate) const MAX_PAGES: usize = 1 + LIST_ENTRIES;

/// Why a transfer cannot be described with PRPs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PrpError {
    /// Piece `i` does not start on a page (only the first may).
    Start(usize),
    /// Piece `i` does not end on a page (only the last may).
    End(usize),
    /// The first piece's address is not dword-aligned.
    Dword,
    /// More than [`MAX_PAGES`] pages.
    TooLong,
}

impl PrpError {
    /// The reason, in words.
    pub(crate) fn why(self) -> String {
        match self {
            PrpError::Start(i) => format!("buffer {i} does not start on a 4 KiB page (only the first may)"),
            PrpError::End(i) => format!("buffer {i} does not end on a 4 KiB page (only the last may)"),
            PrpError::Dword => "the first buffer's address is not 4-byte aligned".into(),
            PrpError::TooLong => format!("the transfer touches more than {MAX_PAGES} pages"),
        }
    }
}

/// The PRP entries of a transfer, in order: `out[0]` is PRP1 (with its offset), the rest
/// whole pages. Returns how many entries were written.
pub(crate) fn entries(
    pieces: impl IntoIterator<Item = (u64, u64)>,
    out: &mut [u64; MAX_PAGES],
) -> Result<usize, PrpError> {
    let page = PAGE as u64;
    let mut n = 0;
    let mut last_end_aligned = true;
    for (i, (addr, len)) in pieces.into_iter().enumerate() {
        if len == 0 {
            continue;
        }
        if !last_end_aligned {
            return Err(PrpError::End(i - 1));
        }
        if n == 0 {
            if addr % 4 != 0 {
                return Err(PrpError::Dword);
            }
        } else if addr % page != 0 {
            return Err(PrpError::Start(i));
        }
        let first_page = addr & !(page - 1);
        let end = addr + len;
        let mut p = first_page;
        while p < end {
            if n == MAX_PAGES {
                return Err(PrpError::TooLong);
            }
            out[n] = if p == first_page { addr } else { p };
            n += 1;
            p += page;
        }
        last_end_aligned = end % page == 0;
    }
    Ok(n)
}

/// PRP1 and PRP2 for `n` entries, with the list (entries 1..n) at `list_iova` when more
/// than two: the caller writes `out[1..n]` there.
pub(crate) fn prp12(out: &[u64; MAX_PAGES], n: usize, list_iova: u64) -> (u64, u64) {
    match n {
        0 => (0, 0),
        1 => (out[0], 0),
        2 => (out[0], out[1]),
        _ => (out[0], list_iova),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pieces: &[(u64, u64)]) -> Result<Vec<u64>, PrpError> {
        let mut out = [0; MAX_PAGES];
        let n = entries(pieces.iter().copied(), &mut out)?;
        Ok(out[..n].to_vec())
    }

    #[test]
    fn one_page_needs_only_prp1_two_pages_prp2_more_a_list() {
        let base = 0x1_0000_0000u64;
        assert_eq!(run(&[(base, 512)]).unwrap(), vec![base]);
        let two = run(&[(base, 8192)]).unwrap();
        assert_eq!(two, vec![base, base + 4096]);
        let mut out = [0; MAX_PAGES];
        out[..2].copy_from_slice(&two);
        assert_eq!(prp12(&out, 2, 0xdead000), (base, base + 4096));
        let three = run(&[(base, 3 * 4096)]).unwrap();
        out[..3].copy_from_slice(&three);
        assert_eq!(prp12(&out, 3, 0xdead000), (base, 0xdead000));
        assert_eq!(prp12(&out, 0, 0xdead000), (0, 0));
    }

    #[test]
    fn an_offset_first_page_shifts_the_page_count() {
        let base = 0x2_0000_0000u64;
        // 4 KiB from 512 bytes into a page touches two pages.
        assert_eq!(run(&[(base + 512, 4096)]).unwrap(), vec![base + 512, base + 4096]);
        assert_eq!(run(&[(base + 2, 8)]).unwrap_err(), PrpError::Dword);
    }

    #[test]
    fn vectored_pieces_must_meet_on_page_boundaries() {
        let (a, b) = (0x1_0000_0000u64, 0x1_0040_0000u64);
        assert_eq!(run(&[(a, 4096), (b, 8192)]).unwrap(), vec![a, b, b + 4096]);
        assert_eq!(run(&[(a, 4096), (b + 8, 512)]).unwrap_err(), PrpError::Start(1));
        assert_eq!(run(&[(a, 1000), (b, 512)]).unwrap_err(), PrpError::End(0));
        // Empty pieces are skipped, the last piece may end anywhere.
        assert_eq!(run(&[(a, 4096), (b, 0), (b, 100)]).unwrap(), vec![a, b]);
    }

    #[test]
    fn the_longest_transfer_is_one_list_page_plus_prp1() {
        let base = 0x1_0000_0000u64;
        let max = run(&[(base, (MAX_PAGES * PAGE) as u64)]).unwrap();
        assert_eq!(max.len(), MAX_PAGES);
        assert_eq!(max[MAX_PAGES - 1], base + ((MAX_PAGES - 1) * PAGE) as u64);
        assert_eq!(run(&[(base, (MAX_PAGES * PAGE) as u64 + 1)]).unwrap_err(), PrpError::TooLong);
    }
}
