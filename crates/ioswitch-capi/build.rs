//! Gives the shared library a versioned soname (`libioswitch.so.0`), so programs linked
//! against it keep working across compatible releases and `scripts/install` can lay out
//! the usual `libioswitch.so -> libioswitch.so.0` links.

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libioswitch.so.{major}");
    println!("cargo:rerun-if-changed=build.rs");
}
