//! Any byte string: parsing returns Ok or a typed error (never panics, never runs away in time or
//! memory); a parsed file dequantizes every tensor, reads config/tokenizer without panicking, and
//! re-writes to a file that parses to the same metadata and tensor bytes.
#![no_main]

use bonsai_gguf::{GgufError, GgufFile, GgufWriter, Qwen3Config, TokenizerMeta};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = GgufFile::from_bytes(data.to_vec()) else { return };
    for info in file.tensors() {
        let view = file.tensor(&info.name).expect("every listed tensor has a view");
        view.dequantize_to_vec().expect("a validated tensor always dequantizes");
    }
    let _ = Qwen3Config::from_gguf(&file);
    let _ = TokenizerMeta::from_gguf(&file);

    let mut bytes = Vec::new();
    GgufWriter::from_file(&file).expect("copy a valid file").write_to(&mut bytes).expect("write");
    match GgufFile::from_bytes(bytes) {
        Ok(again) => {
            assert_eq!(again.metadata(), file.metadata());
            assert_eq!(again.tensors().len(), file.tensors().len());
            for info in file.tensors() {
                assert_eq!(again.tensor(&info.name).map(|v| v.data), file.tensor(&info.name).map(|v| v.data));
            }
        }
        // Re-packing can turn a 2-bit tensor whose size was told by its padding into an
        // ambiguous one; that is a documented limit, every other error is a bug.
        Err(GgufError::AmbiguousLayout { .. }) => {}
        Err(e) => panic!("re-written file does not parse: {e}"),
    }
});
