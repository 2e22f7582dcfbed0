//! `params::parameters`: what DWARF says functions take and return, on
//! real gcc and clang output (`-g -O2`) of `programs/args/auto.c`, whose
//! declarations are the truth; and on input without DWARF or not ELF.

use fntrace_sites::params::{parameters, Params, Type};
use fntrace_testkit::{cc, program, Work};

fn build(work: &Work, compiler: &str) -> Vec<Params> {
    let exe = work.path(compiler);
    let src = program("args/auto.c");
    cc(compiler, &["-g", "-O2", &src, "-o", exe.to_str().unwrap()]);
    parameters(&std::fs::read(&exe).unwrap()).unwrap()
}

fn find<'a>(all: &'a [Params], name: &str) -> &'a Params {
    all.iter().find(|p| p.name == name).unwrap_or_else(|| {
        panic!(
            "no {name} in {:?}",
            all.iter().map(|p| &p.name).collect::<Vec<_>>()
        )
    })
}

#[test]
fn declarations_as_written() {
    let work = Work::new("params");
    for compiler in ["gcc", "clang-16"] {
        let all = build(&work, compiler);
        let int = |size, signed| Type::Int { size, signed };
        let ints = find(&all, "ints");
        assert_eq!(
            ints.params,
            [
                int(1, true),
                int(2, false),
                int(4, true),
                int(8, false),
                int(8, true)
            ],
            "{compiler}"
        );
        assert_eq!(ints.ret, Some(int(4, true)));
        assert_eq!(find(&all, "flag").params, [Type::Bool, Type::Char], "{compiler}");
        let paint = find(&all, "paint");
        let Some(Type::Enum { size: 4, values }) = &paint.ret else {
            panic!("{compiler}: {paint:?}")
        };
        assert!(values.contains(&(5, "GREEN".to_string())) && values.contains(&(-2, "BLUE".to_string())));
        assert_eq!(
            find(&all, "name").params,
            [Type::CString, Type::Pointer],
            "{compiler}"
        );
        assert_eq!(find(&all, "name").ret, Some(Type::CString));
        assert_eq!(
            find(&all, "mix").params,
            [
                Type::Float { size: 4 },
                int(4, true),
                Type::Float { size: 8 },
                int(8, true)
            ],
            "{compiler}"
        );
        assert_eq!(
            find(&all, "bybig").params,
            [int(4, true), Type::Aggregate { size: 32 }, int(4, true)],
            "{compiler}"
        );
        assert_eq!(find(&all, "eight").params.len(), 8);
        assert_eq!(find(&all, "nothing").params, []);
        assert_eq!(find(&all, "nothing").ret, None);
        assert!(all.iter().all(|p| p.address != 0));
    }
}

#[test]
fn no_dwarf_no_parameters_and_bad_input_is_an_error() {
    let work = Work::new("params-none");
    let exe = work.path("plain");
    let src = program("args/auto.c");
    cc("gcc", &["-O2", &src, "-o", exe.to_str().unwrap()]);
    assert_eq!(parameters(&std::fs::read(&exe).unwrap()).unwrap(), []);
    assert!(parameters(b"not an elf file").is_err());
    assert!(parameters(&[]).is_err());
}
