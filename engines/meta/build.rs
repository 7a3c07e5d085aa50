//! Compiles `proto/meta.proto` with protox (pure Rust, no protoc) and
//! generates the tonic client and server from it.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/meta.proto");
    let descriptors = protox::compile(["proto/meta.proto"], ["proto"])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
