//! GGUF metadata values: the 13 on-disk value types and the typed accessors that convert
//! between integer widths only when no information is lost.

use crate::error::GgufError;

/// On-disk value type ids (GGUF spec `gguf_metadata_value_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    pub fn from_id(id: u32) -> Option<Self> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    pub fn id(self) -> u32 {
        self as u32
    }

    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }

    /// Smallest number of bytes one value of this type occupies on disk; used to cap
    /// pre-allocation by the bytes that remain (a string or array is at least its length prefix).
    pub(crate) fn min_encoded_len(self) -> u64 {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | String => 8,
            Array => 4 + 8,
        }
    }
}

/// One metadata value. An array keeps its element type so an empty array re-writes identically.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    /// Element type, then the elements (all of that type; nested arrays each carry their own).
    Array(ValueType, Vec<MetaValue>),
}

impl MetaValue {
    pub fn value_type(&self) -> ValueType {
        match self {
            MetaValue::U8(_) => ValueType::U8,
            MetaValue::I8(_) => ValueType::I8,
            MetaValue::U16(_) => ValueType::U16,
            MetaValue::I16(_) => ValueType::I16,
            MetaValue::U32(_) => ValueType::U32,
            MetaValue::I32(_) => ValueType::I32,
            MetaValue::U64(_) => ValueType::U64,
            MetaValue::I64(_) => ValueType::I64,
            MetaValue::F32(_) => ValueType::F32,
            MetaValue::F64(_) => ValueType::F64,
            MetaValue::Bool(_) => ValueType::Bool,
            MetaValue::String(_) => ValueType::String,
            MetaValue::Array(..) => ValueType::Array,
        }
    }

    /// A short type description for error messages, e.g. "u32" or "array of string".
    pub fn type_description(&self) -> String {
        match self {
            MetaValue::Array(elem, _) => format!("array of {}", elem.name()),
            other => other.value_type().name().to_string(),
        }
    }

    /// Any integer value as i128 (every GGUF integer width fits), else None.
    pub fn as_integer(&self) -> Option<i128> {
        Some(match *self {
            MetaValue::U8(v) => v.into(),
            MetaValue::I8(v) => v.into(),
            MetaValue::U16(v) => v.into(),
            MetaValue::I16(v) => v.into(),
            MetaValue::U32(v) => v.into(),
            MetaValue::I32(v) => v.into(),
            MetaValue::U64(v) => v.into(),
            MetaValue::I64(v) => v.into(),
            _ => return None,
        })
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<(ValueType, &[MetaValue])> {
        match self {
            MetaValue::Array(elem, items) => Some((*elem, items)),
            _ => None,
        }
    }
}

/// Integer conversion for a named key: lossless or a typed error naming the key.
pub(crate) fn integer_as<T: TryFrom<i128>>(
    key: &str,
    value: &MetaValue,
    expected: &'static str,
) -> Result<T, GgufError> {
    let wide = value.as_integer().ok_or_else(|| GgufError::WrongType {
        key: key.to_string(),
        expected,
        found: value.type_description(),
    })?;
    T::try_from(wide).map_err(|_| GgufError::OutOfRange {
        key: key.to_string(),
        value: wide.to_string(),
        reason: format!("does not fit in {expected}"),
    })
}

/// Float read for a named key. f32 and f64 values are returned as f64 (f32 widens exactly);
/// integers convert when exactly representable in f64.
pub(crate) fn float_as_f64(key: &str, value: &MetaValue) -> Result<f64, GgufError> {
    match *value {
        MetaValue::F32(v) => Ok(v.into()),
        MetaValue::F64(v) => Ok(v),
        _ => {
            let wide = value.as_integer().ok_or_else(|| GgufError::WrongType {
                key: key.to_string(),
                expected: "float",
                found: value.type_description(),
            })?;
            // Integers up to 2^53 are exact in f64.
            const F64_EXACT_INT: i128 = 1 << 53;
            if wide.abs() > F64_EXACT_INT {
                return Err(GgufError::OutOfRange {
                    key: key.to_string(),
                    value: wide.to_string(),
                    reason: "integer too large to convert to a float exactly".into(),
                });
            }
            Ok(wide as f64)
        }
    }
}
