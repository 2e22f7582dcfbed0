// A Rust program calling libc through the GOT, without a PLT: `getpid`
// 100 times, and `write` through std. It prints how many getpid calls it made.
extern "C" {
    fn getpid() -> i32;
}

fn main() {
    let mut calls = 0;
    let mut sum = 0i64;
    for _ in 0..100 {
        // SAFETY: getpid has no preconditions.
        sum += i64::from(unsafe { getpid() } > 0);
        calls += 1;
    }
    println!("getpid={calls} positive={sum}");
}
