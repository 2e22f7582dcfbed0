//! The library crate of the build table's Rust program
//! (tests/build_table.rs): a generic type whose methods are instantiated
//! both here and in the crate that uses it (each crate gets its own copy,
//! Rust's counterpart of C++ templates in two objects).

pub struct Bag<T> {
    items: Vec<T>,
}

impl<T: Copy + Default + std::ops::AddAssign> Bag<T> {
    #[inline(never)]
    pub fn new() -> Self {
        Bag { items: Vec::new() }
    }

    #[inline(never)]
    pub fn add(&mut self, x: T) {
        self.items.push(x);
    }

    #[inline(never)]
    pub fn sum(&self) -> T {
        let mut s = T::default();
        for &x in &self.items {
            s += x;
        }
        s
    }
}

#[inline(never)]
pub fn mix(x: i64) -> i64 {
    x * 31 + 7
}

#[inline(never)]
pub fn fill_ints(n: i64) -> i64 {
    let mut bag = Bag::new();
    for i in 0..n {
        bag.add(mix(i));
    }
    bag.sum()
}
