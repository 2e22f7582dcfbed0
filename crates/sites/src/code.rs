//! A file's code as discovery addresses it: by section index and link-time
//! address. What a patcher decodes is read here, from the file, never from
//! memory (which may already hold a patch): `fntrace list --sites` decodes
//! each bare site's function with it.

use crate::error::Result;
use crate::image::Image;
use crate::model::{Binary, Function};

/// The executable sections of an ELF file.
pub struct Code<'d> {
    image: Image<'d>,
}

impl<'d> Code<'d> {
    /// The code of the ELF file `data` (errors as [`discover`](crate::discover)'s).
    pub fn new(data: &'d [u8]) -> Result<Code<'d>> {
        Ok(Code {
            image: Image::parse(data)?,
        })
    }

    /// The bytes from `address` to the end of executable section
    /// `section`; `None` outside it.
    pub fn from_address(&self, section: usize, address: u64) -> Option<&'d [u8]> {
        self.image.code(section, address)
    }

    /// The bytes of function `index` of `binary` (found in this file)
    /// from its start to the next function of its section, or to the
    /// section's end, and the address where they end: the function and the
    /// padding after it, what a patcher decodes (`fntrace_arch::x86_64::
    /// bare::analyze`'s `code` and `limit`); `None` if its section does not
    /// hold its start.
    pub fn function(&self, binary: &Binary, index: usize) -> Option<(&'d [u8], u64)> {
        let f: &Function = binary.functions.get(index)?;
        let code = self.from_address(f.section, f.address)?;
        let section_end = f.address + code.len() as u64;
        let limit = binary
            .functions
            .get(index + 1)
            .filter(|n| n.section == f.section && n.address > f.address)
            .map_or(section_end, |n| n.address.min(section_end));
        Some((&code[..(limit - f.address) as usize], limit))
    }
}
