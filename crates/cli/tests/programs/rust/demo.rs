//! A small Rust program: modules, generics, traits, closures.

mod shapes {
    pub trait Area {
        fn area(&self) -> f64;
    }

    pub struct Circle(pub f64);

    impl Area for Circle {
        #[inline(never)]
        fn area(&self) -> f64 {
            3.0 * self.0 * self.0
        }
    }

    #[inline(never)]
    pub fn largest<T: PartialOrd + Copy>(items: &[T]) -> T {
        let mut best = items[0];
        for &item in items {
            if item > best {
                best = item;
            }
        }
        best
    }
}

#[inline(never)]
fn fib(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

fn main() {
    use shapes::Area;
    let n = std::env::args().count() as u64 + 9;
    let square = |x: u64| x * x;
    let values = [fib(n), square(n), 3];
    let c = shapes::Circle(n as f64);
    println!("{} {} {}", shapes::largest(&values), shapes::largest(&[1.5f64, 0.5]), c.area());
}
