//! Physical Region Page entries (NVMe base spec, "Physical Region Page Entry and List"):
//! how a transfer's memory is described to the controller.
//!
//! A transfer is a list of pieces of DMA memory (their device addresses and lengths).
//! PRP1 holds the first piece's address (any dword offset inside a page); every further
//! entry is a whole page. With one page that is all; with two, PRP2 is the second page;
//! with more, PRP2 points at a PRP list: 4 KiB pages of 512 entries each, chained — when
//! more entries follow than fit in a list page, its last entry points to the next list
//! page instead. The driver keeps each command's list pages contiguous (so the chain
//! pointer of page `p` is the address of page `p + 1`) and sizes them for the largest
//! transfer it allows (the controller's MDTS, capped at [`DRIVER_MAX`]).
//! Every piece but the first must start on a page, and every piece but the last must
//! end on one.

use super::mem::PAGE;

/// Most entries one PRP list page holds.
pub(crate) const LIST_ENTRIES: usize = PAGE / 8;
/// Most bytes one command carries through this driver when the controller's MDTS allows
/// more or sets no limit: every command id owns enough list pages for it (5 pages, 20 KiB).
pub(crate) const DRIVER_MAX: u64 = 8 << 20;

/// Why a transfer cannot be described with PRPs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PrpError {
    /// Piece `i` does not start on a page (only the first may).
    Start(usize),
    /// Piece `i` does not end on a page (only the last may).
    End(usize),
    /// The first piece's address is not dword-aligned.
    Dword,
    /// More pages than the command's PRP list pages can hold (the number given).
    TooLong(usize),
}

impl PrpError {
    /// The reason, in words.
    pub(crate) fn why(self) -> String {
        match self {
            PrpError::Start(i) => format!("buffer {i} does not start on a 4 KiB page (only the first may)"),
            PrpError::End(i) => format!("buffer {i} does not end on a 4 KiB page (only the last may)"),
            PrpError::Dword => "the first buffer's address is not 4-byte aligned".into(),
            PrpError::TooLong(max) => format!("the transfer touches more than {max} pages"),
        }
    }
}

/// Pages of PRP list that a transfer of `n` entries needs: none for one or two (PRP1 and
/// PRP2 hold them), else one per 511 entries past PRP1 (the 512th slot chains to the
/// next page), except that the last page uses all 512 slots.
pub(crate) fn list_pages(n: usize) -> usize {
    let l = n.saturating_sub(1);
    if n <= 2 {
        0
    } else if l <= LIST_ENTRIES {
        1
    } else {
        1 + (l - LIST_ENTRIES).div_ceil(LIST_ENTRIES - 1)
    }
}

/// The most entries a transfer may have when its command owns `pages` list pages.
pub(crate) fn max_entries(pages: usize) -> usize {
    match pages {
        0 => 2,
        _ => pages * (LIST_ENTRIES - 1) + 2,
    }
}

/// Entries (pages touched) of a transfer of up to `bytes` bytes starting anywhere in a
/// page: one more than its whole pages, for the offset of the first.
pub(crate) fn entries_for(bytes: u64) -> usize {
    (bytes.div_ceil(PAGE as u64) + 1) as usize
}

/// Where entry `i` (1 ≤ `i` < `n`) of a transfer of `n` entries goes in its list pages:
/// the index of the 8-byte word from the start of the first page.
pub(crate) fn list_slot(i: usize, n: usize) -> usize {
    let j = i - 1;
    let p = (j / (LIST_ENTRIES - 1)).min(list_pages(n) - 1);
    p * LIST_ENTRIES + (j - p * (LIST_ENTRIES - 1))
}

/// Checks a transfer and calls `put(i, address)` for each of its PRP entries in order:
/// entry 0 is PRP1 (with its offset), the rest whole pages. Returns how many; more
/// than `max` is [`PrpError::TooLong`].
pub(crate) fn entries(
    pieces: impl IntoIterator<Item = (u64, u64)>,
    max: usize,
    mut put: impl FnMut(usize, u64),
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
            if n == max {
                return Err(PrpError::TooLong(max));
            }
            put(n, if p == first_page { addr } else { p });
            n += 1;
            p += page;
        }
        last_end_aligned = end % page == 0;
    }
    Ok(n)
}

/// Describes a transfer: returns PRP1 and PRP2 and, when it needs a list, writes the
/// list (entries and chain pointers) with `put(word index, value)` into the command's
/// contiguous list pages at device address `list_iova`, which hold at most `max`
/// entries (see [`max_entries`]).
pub(crate) fn describe<I>(
    pieces: I,
    max: usize,
    list_iova: u64,
    mut put: impl FnMut(usize, u64),
) -> Result<(u64, u64), PrpError>
where
    I: IntoIterator<Item = (u64, u64)> + Clone,
{
    let n = entries(pieces.clone(), max, |_, _| {})?;
    let (mut p1, mut p2) = (0, 0);
    entries(pieces, max, |i, a| match i {
        0 => p1 = a,
        1 if n == 2 => p2 = a,
        _ => put(list_slot(i, n), a),
    })?;
    if n > 2 {
        p2 = list_iova;
        for p in 1..list_pages(n) {
            put(p * LIST_ENTRIES - 1, list_iova + (p * PAGE) as u64);
        }
    }
    Ok((p1, p2))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 1 + LIST_ENTRIES;

    fn run(pieces: &[(u64, u64)]) -> Result<Vec<u64>, PrpError> {
        let mut out = Vec::new();
        entries(pieces.iter().copied(), MAX, |i, a| {
            assert_eq!(i, out.len(), "entries come in order");
            out.push(a)
        })?;
        Ok(out)
    }

    /// The list pages of one command, as the controller sees them.
    struct Lists {
        iova: u64,
        words: Vec<u64>,
    }

    impl Lists {
        fn new(pages: usize) -> Lists {
            Lists { iova: 0x7_0000_0000, words: vec![0xbad; pages * LIST_ENTRIES] }
        }
        /// Describes `pieces` with at most `max` entries into these pages.
        fn describe(&mut self, pieces: &[(u64, u64)], max: usize) -> Result<(u64, u64), PrpError> {
            let words = &mut self.words;
            describe(pieces.iter().copied(), max, self.iova, |w, v| words[w] = v)
        }
        /// What a controller reads for a transfer of `len` bytes from PRP1/PRP2: the
        /// page addresses, following the list and its chain pointers.
        fn walk(&self, p1: u64, p2: u64, len: u64) -> Vec<u64> {
            let page = PAGE as u64;
            let n = ((p1 % page) + len).div_ceil(page) as usize;
            let mut out = vec![p1];
            if n == 2 {
                out.push(p2);
            } else if n > 2 {
                let mut at = p2;
                let mut left = n - 1;
                while left > 0 {
                    let w = ((at - self.iova) / 8) as usize;
                    let slot = w % LIST_ENTRIES;
                    if slot == LIST_ENTRIES - 1 && left > 1 {
                        at = self.words[w]; // chain pointer to the next list page
                        assert_eq!(at % page, 0, "a chain pointer names a page");
                        continue;
                    }
                    out.push(self.words[w]);
                    left -= 1;
                    at += 8;
                }
            }
            out
        }
    }

    #[test]
    fn one_page_needs_only_prp1_two_pages_prp2_more_a_list() {
        let base = 0x1_0000_0000u64;
        assert_eq!(run(&[(base, 512)]).unwrap(), vec![base]);
        assert_eq!(run(&[(base, 8192)]).unwrap(), vec![base, base + 4096]);
        let mut l = Lists::new(1);
        assert_eq!(l.describe(&[(base, 512)], MAX), Ok((base, 0)));
        assert_eq!(l.describe(&[(base, 8192)], MAX), Ok((base, base + 4096)));
        assert_eq!(l.describe(&[(base, 3 * 4096)], MAX), Ok((base, l.iova)));
        assert_eq!(&l.words[..2], &[base + 4096, base + 8192]);
        assert_eq!(l.describe(&[], MAX), Ok((0, 0)));
        assert_eq!((list_pages(0), list_pages(1), list_pages(2), list_pages(3)), (0, 0, 0, 1));
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
    fn one_list_page_holds_512_entries_and_a_513th_needs_a_chained_page() {
        let base = 0x1_0000_0000u64;
        // 513 pages: PRP1 plus a full list page, its last slot an entry, not a pointer.
        let len = (MAX * PAGE) as u64;
        assert_eq!(list_pages(MAX), 1);
        let mut l = Lists::new(2);
        let (p1, p2) = l.describe(&[(base, len)], max_entries(2)).unwrap();
        assert_eq!(l.words[LIST_ENTRIES - 1], base + len - PAGE as u64, "the 512th slot is data");
        assert_eq!(l.walk(p1, p2, len), run(&[(base, len)]).unwrap());
        // One page more: the 512th slot chains to the second list page.
        let len = len + PAGE as u64;
        assert_eq!(list_pages(MAX + 1), 2);
        let (p1, p2) = l.describe(&[(base, len)], max_entries(2)).unwrap();
        assert_eq!(l.words[LIST_ENTRIES - 1], l.iova + PAGE as u64, "the 512th slot points to page 2");
        assert_eq!(l.words[LIST_ENTRIES..LIST_ENTRIES + 2], [base + 512 * 4096, base + 513 * 4096]);
        let pages: Vec<u64> = (0..MAX as u64 + 1).map(|i| base + i * 4096).collect();
        assert_eq!(l.walk(p1, p2, len), pages);
        // With one list page only, 514 pages are refused, not written past the page.
        assert_eq!(run(&[(base, len)]).unwrap_err(), PrpError::TooLong(MAX));
        assert_eq!(Lists::new(1).describe(&[(base, len)], max_entries(1)), Err(PrpError::TooLong(MAX)));
    }

    #[test]
    fn chained_lists_describe_every_length_up_to_the_driver_maximum() {
        let base = 0x3_0000_0000u64;
        let most = entries_for(DRIVER_MAX);
        let pages = list_pages(most);
        assert_eq!(pages, 5, "8 MiB at an offset: 2049 entries, 2048 in lists of 511 + 512");
        assert!(max_entries(pages) >= most && max_entries(pages - 1) < most);
        let mut l = Lists::new(pages);
        // Every page count from 1 to the maximum, page-aligned and at an offset, and in
        // two pieces: the controller's walk finds exactly the pages of the buffers.
        for n in 1..=most {
            for off in [0u64, 512] {
                let len = (n as u64 * 4096).saturating_sub(off).max(8);
                let want = run_max(&[(base + off, len)], most);
                let (p1, p2) = l.describe(&[(base + off, len)], max_entries(pages)).unwrap();
                assert_eq!(l.walk(p1, p2, len), want, "{n} pages at offset {off}");
                assert_eq!(want.len(), n);
            }
            if n >= 2 {
                let (a, b) = (base, 0x5_0000_0000u64);
                let split = [(a, 4096u64), (b, (n as u64 - 1) * 4096)];
                let (p1, p2) = l.describe(&split, max_entries(pages)).unwrap();
                assert_eq!(l.walk(p1, p2, n as u64 * 4096), run_max(&split, most));
            }
        }
        // The chain pointers of a full description point at the next page, in order.
        let (_, p2) = l.describe(&[(base + 512, DRIVER_MAX)], max_entries(pages)).unwrap();
        assert_eq!(p2, l.iova);
        for p in 1..pages {
            assert_eq!(l.words[p * LIST_ENTRIES - 1], l.iova + (p * PAGE) as u64);
        }
        let too_long = [(base, (max_entries(pages) as u64 + 1) * 4096)];
        assert_eq!(l.describe(&too_long, max_entries(pages)), Err(PrpError::TooLong(max_entries(pages))));
    }

    fn run_max(pieces: &[(u64, u64)], max: usize) -> Vec<u64> {
        let mut out = Vec::new();
        entries(pieces.iter().copied(), max, |_, a| out.push(a)).unwrap();
        out
    }

    #[test]
    fn list_sizes_follow_the_chaining_rule() {
        // n entries: PRP1 plus n - 1 in lists of 511 entries and a pointer, the last 512.
        for (n, pages) in [(513, 1), (514, 2), (1024, 2), (1025, 3), (1535, 3), (1536, 4)] {
            assert_eq!(list_pages(n), pages, "{n} entries");
        }
        for k in 1..8 {
            assert_eq!(list_pages(max_entries(k)), k);
            assert_eq!(list_pages(max_entries(k) + 1), k + 1);
        }
        assert_eq!(entries_for(512 << 10), 129);
        assert_eq!(entries_for(4096), 2, "4 KiB at an offset touches two pages");
    }
}
