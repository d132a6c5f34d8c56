// Macro expansion that doubles at every level: 2^40 tokens from a few lines.
#![recursion_limit = "1000"]
macro_rules! bomb {
    () => { 1 };
    (x $($rest:tt)*) => { bomb!($($rest)*) + bomb!($($rest)*) };
}

fn main() {
    let v: u64 = bomb!(x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x);
    println!("{}", v);
}
