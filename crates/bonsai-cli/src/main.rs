//! The `bonsai` command line.

fn main() {
    println!("bonsai");
}
