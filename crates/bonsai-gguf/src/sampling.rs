//! The sampler settings a file recommends (`general.sampling.*`), read as llama.cpp reads them:
//! a number of any GGUF type, or a string holding one (llama.cpp parses the value's text); any
//! other value, or one outside the setting's range, counts as absent.

use crate::keys::sampling as k;
use crate::reader::GgufFile;
use crate::value::MetaValue;

/// Each field is None where the file says nothing usable.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SamplingDefaults {
    pub temperature: Option<f32>,
    pub top_k: Option<usize>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    pub repeat_penalty: Option<f32>,
}

fn number(value: &MetaValue) -> Option<f64> {
    match value {
        MetaValue::F32(v) => Some(f64::from(*v)),
        MetaValue::F64(v) => Some(*v),
        MetaValue::String(s) => s.trim().parse().ok(),
        other => other.as_integer().map(|i| i as f64),
    }
}

impl SamplingDefaults {
    pub fn from_gguf(file: &GgufFile) -> Self {
        let get = |key: &str, ok: &dyn Fn(f64) -> bool| file.get(key).and_then(number).filter(|v| v.is_finite() && ok(*v));
        let unit = |v: f64| (0.0..=1.0).contains(&v);
        Self {
            temperature: get(k::TEMP, &|v| v >= 0.0).map(|v| v as f32),
            top_k: get(k::TOP_K, &|v| v >= 0.0 && v.fract() == 0.0).map(|v| v as usize),
            top_p: get(k::TOP_P, &unit).map(|v| v as f32),
            min_p: get(k::MIN_P, &unit).map(|v| v as f32),
            repeat_penalty: get(k::PENALTY_REPEAT, &|v| v > 0.0).map(|v| v as f32),
        }
    }

    /// Whether the file recommends anything.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// One line for `bonsai info` and the load message, e.g. "temp 1, top-k 20, top-p 0.95".
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(t) = self.temperature {
            parts.push(format!("temp {t}"));
        }
        if let Some(k) = self.top_k {
            parts.push(format!("top-k {k}"));
        }
        if let Some(p) = self.top_p {
            parts.push(format!("top-p {p}"));
        }
        if let Some(p) = self.min_p {
            parts.push(format!("min-p {p}"));
        }
        if let Some(p) = self.repeat_penalty {
            parts.push(format!("repeat-penalty {p}"));
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::GgufWriter;

    fn file_with(entries: &[(&str, MetaValue)]) -> GgufFile {
        let mut w = GgufWriter::new();
        for (key, value) in entries {
            w.add_metadata(key, value.clone());
        }
        let mut bytes = Vec::new();
        w.write_to(&mut bytes).unwrap();
        GgufFile::from_bytes(bytes).unwrap()
    }

    #[test]
    fn numbers_of_any_type_and_numeric_strings_are_read() {
        let file = file_with(&[
            (k::TEMP, MetaValue::F32(1.0)),
            (k::TOP_K, MetaValue::I32(20)),
            (k::TOP_P, MetaValue::String("0.95".into())),
            (k::MIN_P, MetaValue::F64(0.0)),
        ]);
        let d = SamplingDefaults::from_gguf(&file);
        assert_eq!(d, SamplingDefaults { temperature: Some(1.0), top_k: Some(20), top_p: Some(0.95), min_p: Some(0.0), repeat_penalty: None });
        assert_eq!(d.describe(), "temp 1, top-k 20, top-p 0.95, min-p 0");
    }

    #[test]
    fn values_of_the_wrong_kind_or_range_count_as_absent() {
        let file = file_with(&[
            (k::TEMP, MetaValue::F32(-1.0)),
            (k::TOP_K, MetaValue::F32(2.5)),
            (k::TOP_P, MetaValue::F32(1.5)),
            (k::MIN_P, MetaValue::String("low".into())),
            (k::PENALTY_REPEAT, MetaValue::Bool(true)),
        ]);
        assert!(SamplingDefaults::from_gguf(&file).is_empty());
    }
}
