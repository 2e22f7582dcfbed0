//! The program crate of the build table's Rust program: with no
//! arguments, n = 10, and it calls `Bag::<i64>` methods 3 + 1 times
//! (`fill_ints` in the library adds n more with its own copy), `mix`
//! n + 1 times, `half` n times.

#[inline(never)]
fn half(x: f64) -> f64 {
    x / 2.0
}

#[inline(never)]
fn fill_halves(n: i64) -> f64 {
    let mut bag = bag::Bag::new();
    for i in 0..n {
        bag.add(half(i as f64));
    }
    bag.sum()
}

fn main() {
    let n = std::env::args().count() as i64 + 9;
    let mut results = bag::Bag::new();
    results.add(bag::fill_ints(n));
    results.add(fill_halves(n) as i64);
    results.add(bag::mix(n));
    println!("{}", results.sum());
}
