// `#[path]` turns any file into a module: build.rs-like reach into the build machine.
#[path = "/proc/self/environ"]
mod environ;
#[path = "/etc/passwd"]
mod passwd;

fn main() {}
