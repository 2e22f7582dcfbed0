//! The argument spec grammar: what parses, what it means, and the errors.

use super::*;

fn one(text: &str) -> ArgSpec {
    ArgSpec::parse(text).unwrap_or_else(|e| panic!("{e}"))
}

fn reason(text: &str) -> String {
    ArgSpec::parse(text).unwrap_err().to_string()
}

#[test]
fn integer_arguments_follow_the_sysv_registers_then_the_stack() {
    let s = one("add@arg1,arg2/u32,arg6/x,arg7/i16");
    assert_eq!(s.pattern, "add");
    let places: Vec<Place> = s.args.iter().map(|i| i.place).collect();
    let reg = |n: &str| Place::Reg(REGISTERS.iter().position(|r| *r == n).unwrap() as u8);
    assert_eq!(places, [reg("rdi"), reg("rsi"), reg("r9"), Place::Stack(1)]);
    assert_eq!((s.args[0].format, s.args[0].size), (Format::Signed, 8));
    assert_eq!((s.args[1].format, s.args[1].size), (Format::Unsigned, 4));
    assert_eq!((s.args[3].format, s.args[3].size), (Format::Signed, 2));
    assert!(s.retval.is_none());
}

#[test]
fn floats_strings_places_and_return_values() {
    let s = one("f@fparg1,fparg2/32,arg1/s,arg2%r12,arg3/c%stack+2,retval/f");
    assert_eq!(s.args[0].place, Place::Xmm(0));
    assert_eq!((s.args[1].place, s.args[1].size), (Place::Xmm(1), 4));
    assert_eq!(s.args[2].format, Format::Str);
    assert_eq!(s.args[3].place, Place::Reg(12));
    assert_eq!(
        (s.args[4].place, s.args[4].format),
        (Place::Stack(2), Format::Char)
    );
    let r = s.retval.unwrap();
    assert_eq!((r.place, r.format, r.size), (Place::Retval, Format::Float, 8));
}

#[test]
fn display_round_trips() {
    for text in [
        "add@arg1,arg2/u32,arg7/x16",
        "f@fparg1/32,arg1/s,arg2%r12,arg3/c%stack+2,retval/f",
        "*:mod:libz@retval/i32",
        "g@fparg9%stack+3,arg1/o,arg2/p,retval",
        "label@arg2/S,arg3/S%rdx,retval/S",
    ] {
        let s = one(text);
        assert_eq!(one(&s.to_string()), s, "{text} -> {s}");
    }
}

#[test]
fn merging_adds_arguments_and_takes_the_return_value() {
    let mut s = one("f@arg1");
    s.merge(&one("f@retval/u8"));
    s.merge(&one("f@arg2/s"));
    assert_eq!(s.to_string(), "f@arg1/d64%rdi,arg2/s64%rsi,retval/u8");
}

#[test]
fn malformed_specs_say_what_is_wrong() {
    for (text, says) in [
        ("foo@arg0", "arguments count from 1"),
        ("foo", "expected FUNCTION@"),
        ("@arg1", "no function"),
        ("foo@arg1/q", "unknown format 'q'"),
        ("foo@arg1/S32", "a pointer is 64 bits"),
        ("foo@arg1/d12", "unknown size '12'"),
        ("foo@arg1%rzz", "unknown register 'rzz'"),
        ("foo@arg1%rsp", "rsp is not"),
        ("foo@arg1%stack+0", "stack+0"),
        ("foo@argx", "expected a number"),
        ("foo@bar", "unknown value 'bar'"),
        ("foo@fparg1/16", "32 or 64"),
        ("foo@fparg9", "not in a register"),
        ("foo@arg1/s32", "64 bits"),
        ("foo@retval%rax", "no place"),
        ("foo@arg1,,arg2", "empty item"),
    ] {
        let r = reason(text);
        assert!(r.contains(says), "{text}: {r}");
        assert!(r.starts_with(&format!("bad argument spec '{text}'")), "{r}");
        assert!(!r.contains('\n'));
    }
    let many = format!("f@{}", vec!["arg1"; MAX_ITEMS + 1].join(","));
    assert!(reason(&many).contains("more than"));
}
