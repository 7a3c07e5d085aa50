//! Compiles `proto/meta.proto` with protox (pure Rust, no protoc) and
//! generates the tonic client and server from it.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/meta.proto");
    let descriptors = protox::compile(["proto/meta.proto"], ["proto"])?;
    // Maps as BTreeMap: ordered as the store encodes them, and no hashing.
    tonic_prost_build::configure()
        .btree_map(".")
        .compile_fds(descriptors)?;
    Ok(())
}
