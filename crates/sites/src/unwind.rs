//! Function starts from `.eh_frame` (`docs/SITES.md`, "Functions no
//! compiler prepared"): every x86-64 function a compiler emits has a frame
//! description entry (FDE), stripped or not, since unwinding through it
//! needs one. In a stripped file they find the functions no symbol names.
//!
//! The starts are read from `.eh_frame_hdr`'s sorted table when there is
//! one (no CIE is parsed for them), else by walking `.eh_frame`; only the
//! FDEs of starts the caller wants (those no symbol covers) are parsed,
//! for their size and the check of their first row: a function is entered
//! by a call, so at its first address the CFA is `rsp+8`, the return
//! address is at `CFA-8`, and no other register has a rule. A split part
//! (`foo.cold`, jumped into inside `foo`'s frame) fails the check, and so
//! do PLT stubs and `_start` (whose return address is undefined).
//!
//! Unwind data that does not read whole is not trusted at all: an error
//! is returned, and the caller keeps the functions its symbols give.

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, EhFrameOffset, EndianSlice, FrameDescriptionEntry, Pointer,
    RegisterRule, RunTimeEndian, UnwindContext, UnwindSection, X86_64,
};

use object::Object;

use crate::image::Image;

type Reader<'d> = EndianSlice<'d, RunTimeEndian>;

/// A function as its FDE describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fde {
    /// The first address it covers.
    pub start: u64,
    /// How many bytes it covers.
    pub size: u64,
    /// At `start`, the frame is the one a call leaves: CFA `rsp+8`, the
    /// return address at `CFA-8`, no other register saved.
    pub called: bool,
}

/// The unwind sections of a file, ready to read.
struct Frames<'d> {
    eh_frame: EhFrame<Reader<'d>>,
    /// `.eh_frame`'s address.
    address: u64,
    /// `.eh_frame_hdr`, if the file has one.
    hdr: Option<&'d [u8]>,
    bases: BaseAddresses,
    endian: RunTimeEndian,
}

/// The FDEs of `image` (an x86-64 linked file) whose start `wanted`
/// accepts, in the order of the header's table (address order) or of
/// `.eh_frame`; none if it has no `.eh_frame`. `Err`: why the unwind data
/// cannot be trusted.
pub(crate) fn fdes(image: &Image<'_>, wanted: &mut dyn FnMut(u64) -> bool) -> Result<Vec<Fde>, String> {
    let Some(frames) = Frames::new(image) else {
        return Ok(Vec::new());
    };
    let mut ctx = UnwindContext::new();
    let mut found = Vec::new();
    let mut add = |fde: &FrameDescriptionEntry<Reader<'_>>| -> gimli::Result<()> {
        found.push(Fde {
            start: fde.initial_address(),
            size: fde.len(),
            called: called(&frames, fde, &mut ctx)?,
        });
        Ok(())
    };
    match frames.hdr.map(|hdr| frames.through_table(hdr, wanted, &mut add)) {
        Some(Ok(true)) => {}
        Some(Err(e)) => return Err(format!(".eh_frame_hdr: {e}")),
        // No header, or one without a table (or for another .eh_frame).
        None | Some(Ok(false)) => frames
            .walk(wanted, &mut add)
            .map_err(|e| format!(".eh_frame: {e}"))?,
    }
    Ok(found)
}

impl<'d> Frames<'d> {
    fn new(image: &Image<'d>) -> Option<Frames<'d>> {
        let section = |name: &'static str| {
            image
                .sections_named(name)
                .map(|(_, s)| s)
                .find(|s| s.alloc && !s.data.is_empty())
        };
        let eh_frame = section(".eh_frame")?;
        let hdr = section(".eh_frame_hdr");
        let endian = if image.file.is_little_endian() {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        let mut bases = BaseAddresses::default().set_eh_frame(eh_frame.address);
        if let Some(hdr) = hdr {
            bases = bases.set_eh_frame_hdr(hdr.address);
        }
        if let Some(text) = section(".text") {
            bases = bases.set_text(text.address);
        }
        if let Some(got) = section(".got") {
            bases = bases.set_got(got.address);
        }
        let mut parsed = EhFrame::new(eh_frame.data, endian);
        parsed.set_address_size(8);
        Some(Frames {
            eh_frame: parsed,
            address: eh_frame.address,
            hdr: hdr.map(|h| h.data),
            bases,
            endian,
        })
    }

    /// The wanted FDEs through the header's table; `Ok(false)` if there
    /// is no table to read, or it is for another `.eh_frame`.
    fn through_table(
        &self,
        hdr: &'d [u8],
        wanted: &mut dyn FnMut(u64) -> bool,
        add: &mut dyn FnMut(&FrameDescriptionEntry<Reader<'d>>) -> gimli::Result<()>,
    ) -> Result<bool, String> {
        let hdr = EhFrameHdr::new(hdr, self.endian)
            .parse(&self.bases, 8)
            .map_err(|e| e.to_string())?;
        if hdr.eh_frame_ptr() != Pointer::Direct(self.address) {
            return Ok(false);
        }
        let Some(table) = hdr.table() else {
            return Ok(false);
        };
        let mut entries = table.iter(&self.bases);
        while let Some((start, fde)) = entries.next().map_err(|e| e.to_string())? {
            let (Pointer::Direct(start), Pointer::Direct(fde)) = (start, fde) else {
                return Err("indirect pointer in the table".into());
            };
            if !wanted(start) {
                continue;
            }
            // `EhHdrTable::pointer_to_offset` would overflow (and panic in
            // a debug build) on an entry before `.eh_frame`.
            let offset = fde
                .checked_sub(self.address)
                .and_then(|o| usize::try_from(o).ok())
                .ok_or_else(|| format!("the entry for {start:#x} is outside .eh_frame"))?;
            let parsed = self
                .eh_frame
                .fde_from_offset(&self.bases, EhFrameOffset(offset), EhFrame::cie_from_offset)
                .map_err(|e| format!("the FDE for {start:#x}: {e}"))?;
            if parsed.initial_address() != start {
                return Err(format!(
                    "the table says {start:#x}, its FDE {:#x}",
                    parsed.initial_address()
                ));
            }
            add(&parsed).map_err(|e| format!("the FDE for {start:#x}: {e}"))?;
        }
        Ok(true)
    }

    /// The wanted FDEs, walking `.eh_frame`.
    fn walk(
        &self,
        wanted: &mut dyn FnMut(u64) -> bool,
        add: &mut dyn FnMut(&FrameDescriptionEntry<Reader<'d>>) -> gimli::Result<()>,
    ) -> gimli::Result<()> {
        let mut entries = self.eh_frame.entries(&self.bases);
        while let Some(entry) = entries.next()? {
            if let gimli::CieOrFde::Fde(partial) = entry {
                let fde = partial.parse(EhFrame::cie_from_offset)?;
                if wanted(fde.initial_address()) {
                    add(&fde)?;
                }
            }
        }
        Ok(())
    }
}

/// Whether `fde`'s first row is the frame a call leaves (see [`Fde`]).
fn called<'d>(
    frames: &Frames<'d>,
    fde: &FrameDescriptionEntry<Reader<'d>>,
    ctx: &mut UnwindContext<usize>,
) -> gimli::Result<bool> {
    let mut rows = fde.rows(&frames.eh_frame, &frames.bases, ctx)?;
    let Some(row) = rows.next_row()? else {
        return Ok(false);
    };
    let cfa = matches!(
        row.cfa(),
        CfaRule::RegisterAndOffset { register, offset: 8 } if *register == X86_64::RSP
    );
    let ra = fde.cie().return_address_register();
    let mut return_address = false;
    for (register, rule) in row.registers() {
        match rule {
            RegisterRule::Offset(-8) if *register == ra => return_address = true,
            // Not saved: as at any entry.
            RegisterRule::SameValue => {}
            _ => return Ok(false),
        }
    }
    Ok(cfa && return_address && row.start_address() == fde.initial_address())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-made `.eh_frame`: one CIE (`zR`, pc-relative sdata4
    /// pointers, CFA `rsp+8`, return address at `CFA-8`) and FDEs whose
    /// instructions are `insns`, at address 0x1000.
    fn eh_frame(fdes: &[(u32, u32, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        // CIE: length, id 0, version 1, "zR", code align 1, data align -8
        // (0x78), ra 16, augmentation length 1, pcrel|sdata4 (0x1b),
        // def_cfa rsp 8, offset r16 1 (CFA-8), padding.
        let cie: &[u8] = &[
            0, 0, 0, 0, 1, b'z', b'R', 0, 1, 0x78, 16, 1, 0x1b, 0x0c, 7, 8, 0x90, 1, 0, 0,
        ];
        out.extend_from_slice(&(cie.len() as u32).to_le_bytes());
        out.extend_from_slice(cie);
        for &(start, size, insns) in fdes {
            let at = out.len();
            let mut body = Vec::new();
            body.extend_from_slice(&((at + 4) as u32).to_le_bytes()); // CIE pointer
            let pc_at = 0x1000 + at as u64 + 8;
            body.extend_from_slice(&((u64::from(start).wrapping_sub(pc_at)) as u32).to_le_bytes());
            body.extend_from_slice(&size.to_le_bytes());
            body.push(0); // augmentation data length
            body.extend_from_slice(insns);
            while (body.len() + 4) % 8 != 0 {
                body.push(0); // DW_CFA_nop
            }
            out.extend_from_slice(&(body.len() as u32).to_le_bytes());
            out.extend_from_slice(&body);
        }
        out.extend_from_slice(&[0; 4]);
        out
    }

    fn read(data: &[u8]) -> gimli::Result<Vec<Fde>> {
        let frames = Frames {
            eh_frame: {
                let mut f = EhFrame::new(data, RunTimeEndian::Little);
                f.set_address_size(8);
                f
            },
            address: 0x1000,
            hdr: None,
            bases: BaseAddresses::default().set_eh_frame(0x1000),
            endian: RunTimeEndian::Little,
        };
        let mut ctx = UnwindContext::new();
        let mut found = Vec::new();
        frames.walk(&mut |_| true, &mut |fde| {
            found.push(Fde {
                start: fde.initial_address(),
                size: fde.len(),
                called: called(&frames, fde, &mut ctx)?,
            });
            Ok(())
        })?;
        Ok(found)
    }

    #[test]
    fn the_first_row_decides() {
        let data = eh_frame(&[
            // As the CIE leaves it, then a push (advance 1, CFA offset 16).
            (0x2000, 0x20, &[0x41, 0x0e, 16]),
            // A split part: CFA rsp+48 and rbx saved from its first byte.
            (0x3000, 0x10, &[0x0e, 48, 0x83, 4]),
            // rbx saved, CFA still rsp+8: not the frame of a call either.
            (0x4000, 0x10, &[0x83, 2]),
            // Return address undefined (`_start`).
            (0x5000, 0x10, &[0x07, 16]),
            // rbx the same value: as at any entry.
            (0x6000, 0x10, &[0x08, 3]),
        ]);
        let found = read(&data).unwrap();
        let got: Vec<(u64, u64, bool)> = found.iter().map(|f| (f.start, f.size, f.called)).collect();
        assert_eq!(
            got,
            [
                (0x2000, 0x20, true),
                (0x3000, 0x10, false),
                (0x4000, 0x10, false),
                (0x5000, 0x10, false),
                (0x6000, 0x10, true),
            ]
        );
    }

    #[test]
    fn garbage_is_an_error_never_a_panic() {
        let good = eh_frame(&[(0x2000, 0x20, &[]), (0x3000, 0x20, &[])]);
        assert_eq!(read(&good).unwrap().len(), 2);
        // Every truncation, and every byte replaced by each of a few values.
        for len in 0..good.len() {
            let _ = read(&good[..len]);
        }
        for at in 0..good.len() {
            for value in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[at] = value;
                let _ = read(&bad);
            }
        }
    }
}
