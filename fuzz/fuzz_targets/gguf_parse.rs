//! Any byte string: parsing returns Ok or a one-line typed error (never panics, never runs away
//! in time or memory); a parsed file dequantizes every tensor, reads config/tokenizer without
//! panicking, and re-writes to a file that parses and re-writes to the same bytes again.
#![no_main]

use bonsai_gguf::{GgufError, GgufFile, GgufWriter, Qwen3Config, TokenizerMeta};
use libfuzzer_sys::fuzz_target;

fn rewrite(file: &GgufFile) -> Vec<u8> {
    let mut bytes = Vec::new();
    GgufWriter::from_file(file).expect("copy a valid file").write_to(&mut bytes).expect("write");
    bytes
}

fn one_line(e: &GgufError) {
    assert!(!e.to_string().contains('\n'), "multi-line error: {e}");
}

fuzz_target!(|data: &[u8]| {
    let file = match GgufFile::from_bytes(data.to_vec()) {
        Ok(file) => file,
        Err(e) => return one_line(&e),
    };
    for info in file.tensors() {
        let view = file.tensor(&info.name).expect("every listed tensor has a view");
        view.dequantize_to_vec().expect("a validated tensor always dequantizes");
    }
    if let Err(e) = Qwen3Config::from_gguf(&file) {
        one_line(&e);
    }
    if let Err(e) = TokenizerMeta::from_gguf(&file) {
        one_line(&e);
    }

    // Metadata may hold NaN floats, so equality is checked on bytes: rewriting is idempotent.
    let first = rewrite(&file);
    match GgufFile::from_bytes(first.clone()) {
        Ok(again) => {
            assert_eq!(again.tensors().len(), file.tensors().len());
            for info in file.tensors() {
                assert_eq!(
                    again.tensor(&info.name).map(|v| v.data),
                    file.tensor(&info.name).map(|v| v.data)
                );
            }
            assert!(rewrite(&again) == first, "second rewrite differs from the first");
        }
        // Re-packing can turn a 2-bit tensor whose block size was told by its padding into one
        // where both sizes fit; that is a documented limit, every other error is a bug.
        Err(GgufError::AmbiguousLayout { .. }) => {}
        Err(e) => panic!("re-written file does not parse: {e}"),
    }
});
