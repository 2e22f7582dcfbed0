// -a on Rust (#20): functions that print their own calls as `fntrace
// replay` shows them, just before they return; every argument and result
// depends on the command line, so that the compiler keeps the standard
// convention (a function whose convention LLVM changed is marked
// DW_CC_nocall and left out by -a).
#[inline(never)]
fn add(a: i32, b: i64) -> i64 {
    let r = a as i64 + b;
    println!("sum::add({a}, {b}) = {r}");
    r
}

#[inline(never)]
fn flag(on: bool, c: u8) -> bool {
    println!("sum::flag({on}, {c}) = {}", !on);
    !on
}

#[inline(never)]
fn scale(x: f64, k: u16) -> f64 {
    let r = x * k as f64;
    println!("sum::scale({x:?}, {k}) = {r:?}");
    r
}

// A `&str` in (two registers: pointer and length) and out (rax and rdx).
// Exported (`no_mangle`): LLVM keeps the Rust convention of a function
// others may call, where it would otherwise change this one's.
#[inline(never)]
#[no_mangle]
pub fn pick<'a>(a: &'a str, b: &'a str, first: bool) -> &'a str {
    let r = if first { a } else { b };
    println!("pick({}, {}, {first}) = {}", shown(a), shown(b), shown(r));
    r
}

// A string as fntrace shows it: quoted, cut at 128 bytes.
fn shown(s: &str) -> String {
    if s.len() > 128 {
        format!("{:?}...", &s[..128])
    } else {
        format!("{s:?}")
    }
}

// Called with a constant and its result unused: LLVM drops `b` and the
// return value from its convention (DW_CC_nocall), so -a must show nothing
// rather than what is in the registers.
#[inline(never)]
fn ignored(a: i32, b: i64) -> i64 {
    println!("# ignored {a} {b}");
    a as i64 * b
}

fn main() {
    let n = std::env::args().count() as i32;
    ignored(n, -40);
    let mut total = 0i64;
    for i in 0..3 {
        total += add(n + i, -40 * (i as i64 + n as i64));
        if flag(total > 0, b'A' + (n + i) as u8) {
            total += 1;
        }
        total += scale(0.5 * (n + i) as f64, (n + i) as u16) as i64;
    }
    let long = "y".repeat(130 + n as usize);
    let word = if n > 1 { "many" } else { "one" };
    let mut len = 0;
    for (a, b) in [(word, "other"), ("", long.as_str()), (long.as_str(), word)] {
        len += pick(a, b, len % 2 == 0).len();
    }
    total += len as i64;
    std::process::exit((total & 0x3f) as i32);
}
