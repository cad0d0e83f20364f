//! The one run-time configuration: every choice a user can make about how bonsai runs its
//! kernels, each a field of [`Config`] with its default written here and nowhere else.
//!
//! It is read once, at the edge (the `bonsai` binary, or a test), by [`Config::from_env`]: the
//! environment variables below, then `BONSAI_KERNEL_CONFIG` and the command line's
//! `--kernel-config`, both a comma-separated list of `key=value` pairs (later pairs win). An
//! unknown key or a bad value is an error naming it; nothing further down reads the environment.
//!
//! | variable | what |
//! |---|---|
//! | `BONSAI_KERNEL_CONFIG` | `key=value` pairs of [`Config`] (see [`KEYS`]) |
//! | `BONSAI_DEVICE` | the CUDA device ordinal (the key `device`) |
//! | `BONSAI_TRACE` | the decode timeline (the key `trace`: `off`, `kernels`, `ctas`; `1` = `kernels`) |
//! | `BONSAI_NVCC` | the nvcc binary the kernel library's compile tier runs (`off`: none) |
//! | `BONSAI_CACHE_DIR` | the cache directory (else `$XDG_CACHE_HOME/bonsai`, else `~/.cache/bonsai`) |

use std::path::PathBuf;

/// `key=value[,key=value...]` pairs of [`Config`].
pub const KERNEL_CONFIG_ENV: &str = "BONSAI_KERNEL_CONFIG";
/// The CUDA device ordinal.
pub const DEVICE_ENV: &str = "BONSAI_DEVICE";
/// The decode timeline (the `trace` key).
pub const TRACE_ENV: &str = "BONSAI_TRACE";
/// The nvcc binary of the kernel library's compile tier.
pub const NVCC_ENV: &str = "BONSAI_NVCC";
/// The cache directory (kernels, the demo model).
pub const CACHE_DIR_ENV: &str = "BONSAI_CACHE_DIR";

/// Most decode-graph replays one trace covers.
pub const MAX_TRACE_REPLAYS: usize = 32;

/// The keys [`Config::set`] accepts, with what each takes (the error message lists them).
pub const KEYS: &[(&str, &str)] = &[
    ("device", "a CUDA device ordinal (default 0)"),
    ("graphs", "on|off: replay each decode step as a captured CUDA graph (default on; off launches every op, for debugging)"),
    ("pdl", "on|off: programmatic dependent launch, each kernel's CTAs start while the previous one drains (default on; off for debugging)"),
    ("embedded", "on|off: use the kernels embedded at build time when they match (default on; off exercises the cache and compilers)"),
    ("trace", "off|kernels|ctas: print the decode graph's per-kernel timeline (default off)"),
    ("trace_replays", "1..=32: decode replays one trace covers (default 1)"),
];

/// Which nvcc the kernel library's compile tier may run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum NvccChoice {
    /// `nvcc` on PATH, if any.
    #[default]
    OnPath,
    /// This binary.
    At(PathBuf),
    /// None (NVRTC compiles).
    Off,
}

/// How much of the decode timeline is recorded (crate::trace).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Trace {
    #[default]
    Off,
    /// Each kernel's release and phase marks.
    Kernels,
    /// Also every CTA's end of the binary GEMVs and prepares (each CTA's atomic delays its exit,
    /// so those kernels' times grow: a separate level).
    Ctas,
}

/// Every run-time choice about how kernels run. [`Default`] is the production configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The CUDA device ordinal.
    pub device: usize,
    /// Capture each decode step as a CUDA graph and replay it.
    pub graphs: bool,
    /// Launch every kernel with programmatic dependent launch.
    pub pdl: bool,
    /// Use the kernels embedded at build time when they were built from this source.
    pub embedded: bool,
    /// The decode timeline.
    pub trace: Trace,
    /// Decode replays one trace covers (1..=[`MAX_TRACE_REPLAYS`]).
    pub trace_replays: usize,
    /// The nvcc of the compile tier.
    pub nvcc: NvccChoice,
    /// Where compiled kernels (and the demo model) are cached; None when no home directory is
    /// known.
    pub cache_dir: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            device: 0,
            graphs: true,
            pdl: true,
            embedded: true,
            trace: Trace::Off,
            trace_replays: 1,
            nvcc: NvccChoice::OnPath,
            cache_dir: None,
        }
    }
}

/// A configuration key or value that is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{source_name}: unknown key {key:?} (keys: {})", key_names())]
    UnknownKey { source_name: String, key: String },
    #[error("{source_name}: {key}={value:?} is not {expects}")]
    BadValue { source_name: String, key: String, value: String, expects: String },
    #[error("{source_name}: {pair:?} is not key=value")]
    NotAPair { source_name: String, pair: String },
}

fn key_names() -> String {
    KEYS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
}

impl Config {
    /// The configuration of this process: defaults, then the environment, then `command_line`
    /// (`--kernel-config`'s pairs, if given). Reads every `BONSAI_*` variable bonsai knows.
    pub fn from_env(command_line: Option<&str>) -> Result<Self, ConfigError> {
        Self::from_vars(|name| std::env::var_os(name).filter(|v| !v.is_empty()).map(|v| v.to_string_lossy().into_owned()), command_line)
    }

    /// [`Self::from_env`] over any variable lookup (tests).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>, command_line: Option<&str>) -> Result<Self, ConfigError> {
        let nvcc = match var(NVCC_ENV) {
            None => NvccChoice::OnPath,
            Some(v) if ["off", "none", "0"].iter().any(|off| v.eq_ignore_ascii_case(off)) => NvccChoice::Off,
            Some(v) => NvccChoice::At(PathBuf::from(v)),
        };
        let mut config = Self { cache_dir: cache_dir_from(&var), nvcc, ..Self::default() };
        if let Some(device) = var(DEVICE_ENV) {
            config.set(DEVICE_ENV, "device", device.trim())?;
        }
        if let Some(trace) = var(TRACE_ENV) {
            config.set(TRACE_ENV, "trace", trace.trim())?;
        }
        if let Some(pairs) = var(KERNEL_CONFIG_ENV) {
            config.apply(KERNEL_CONFIG_ENV, &pairs)?;
        }
        if let Some(pairs) = command_line {
            config.apply("--kernel-config", pairs)?;
        }
        Ok(config)
    }

    /// Applies `key=value[,key=value...]` (`source_name` names where they came from in errors).
    pub fn apply(&mut self, source_name: &str, pairs: &str) -> Result<(), ConfigError> {
        for pair in pairs.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| ConfigError::NotAPair { source_name: source_name.into(), pair: pair.into() })?;
            self.set(source_name, key.trim(), value.trim())?;
        }
        Ok(())
    }

    /// Sets one key.
    pub fn set(&mut self, source_name: &str, key: &str, value: &str) -> Result<(), ConfigError> {
        let bad = |expects: &str| ConfigError::BadValue {
            source_name: source_name.into(),
            key: key.into(),
            value: value.into(),
            expects: expects.into(),
        };
        let switch = || match value {
            "on" | "1" | "true" => Ok(true),
            "off" | "0" | "false" => Ok(false),
            _ => Err(bad("on or off")),
        };
        match key {
            "device" => self.device = value.parse().map_err(|_| bad("a device ordinal (0, 1, ...)"))?,
            "graphs" => self.graphs = switch()?,
            "pdl" => self.pdl = switch()?,
            "embedded" => self.embedded = switch()?,
            "trace" => {
                self.trace = match value {
                    "off" | "0" => Trace::Off,
                    "kernels" | "on" | "1" => Trace::Kernels,
                    "ctas" | "cta" => Trace::Ctas,
                    _ => return Err(bad("off, kernels or ctas")),
                }
            }
            "trace_replays" => {
                self.trace_replays = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_TRACE_REPLAYS).contains(n))
                    .ok_or_else(|| bad("a count in 1..=32"))?
            }
            _ => return Err(ConfigError::UnknownKey { source_name: source_name.into(), key: key.into() }),
        }
        Ok(())
    }

    /// The settings that differ from the defaults, as `key=value` pairs (empty: the defaults).
    pub fn describe_changes(&self) -> String {
        let d = Self::default();
        let on = |b: bool| if b { "on" } else { "off" };
        let mut out = Vec::new();
        if self.device != d.device {
            out.push(format!("device={}", self.device));
        }
        for (key, value, default) in [("graphs", self.graphs, d.graphs), ("pdl", self.pdl, d.pdl), ("embedded", self.embedded, d.embedded)] {
            if value != default {
                out.push(format!("{key}={}", on(value)));
            }
        }
        if self.trace != d.trace {
            out.push(format!("trace={}", match self.trace {
                Trace::Off => "off",
                Trace::Kernels => "kernels",
                Trace::Ctas => "ctas",
            }));
        }
        if self.trace_replays != d.trace_replays {
            out.push(format!("trace_replays={}", self.trace_replays));
        }
        out.join(",")
    }
}

/// `$BONSAI_CACHE_DIR`, else `$XDG_CACHE_HOME/bonsai` (XDG requires an absolute path: a relative
/// one is ignored), else `$HOME/.cache/bonsai`.
fn cache_dir_from(var: &impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(dir) = var(CACHE_DIR_ENV) {
        return Some(PathBuf::from(dir));
    }
    if let Some(xdg) = var("XDG_CACHE_HOME").map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Some(xdg.join("bonsai"));
    }
    var("HOME").map(|home| PathBuf::from(home).join(".cache").join("bonsai"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn the_defaults_are_the_production_configuration() {
        let c = Config::from_vars(vars(&[("HOME", "/home/u")]), None).expect("defaults");
        assert_eq!(c, Config { cache_dir: Some("/home/u/.cache/bonsai".into()), ..Config::default() });
        assert!(c.graphs && c.pdl && c.embedded && c.trace == Trace::Off);
        assert_eq!(c.describe_changes(), "");
    }

    #[test]
    fn pairs_from_the_environment_and_the_command_line_apply_in_order() {
        let env = [(KERNEL_CONFIG_ENV, "graphs=off, pdl=off"), (DEVICE_ENV, "1"), (TRACE_ENV, "1")];
        let c = Config::from_vars(vars(&env), Some("pdl=on,trace_replays=4")).expect("valid");
        assert!(!c.graphs && c.pdl);
        assert_eq!((c.device, c.trace, c.trace_replays), (1, Trace::Kernels, 4));
        assert_eq!(c.describe_changes(), "device=1,graphs=off,trace=kernels,trace_replays=4");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors_naming_them() {
        let err = Config::from_vars(vars(&[(KERNEL_CONFIG_ENV, "graph=off")]), None).expect_err("unknown key");
        assert!(matches!(&err, ConfigError::UnknownKey { key, .. } if key == "graph"), "{err}");
        assert!(err.to_string().contains(KERNEL_CONFIG_ENV) && err.to_string().contains("graphs"), "{err}");
        for bad in ["graphs=maybe", "trace_replays=0", "trace_replays=33", "device=-1", "trace=all", "pdl"] {
            let err = Config::from_vars(vars(&[]), Some(bad)).expect_err(bad);
            assert!(err.to_string().contains("--kernel-config"), "{bad}: {err}");
        }
        let err = Config::from_vars(vars(&[(DEVICE_ENV, "gpu0")]), None).expect_err("bad device");
        assert!(err.to_string().contains(DEVICE_ENV), "{err}");
    }

    #[test]
    fn the_cache_directory_follows_the_usual_order() {
        let c = |pairs| Config::from_vars(vars(pairs), None).expect("valid").cache_dir;
        assert_eq!(c(&[(CACHE_DIR_ENV, "/c"), ("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]), Some("/c".into()));
        assert_eq!(c(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]), Some("/x/bonsai".into()));
        assert_eq!(c(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")]), Some("/h/.cache/bonsai".into()), "XDG must be absolute");
        assert_eq!(c(&[("HOME", "/h")]), Some("/h/.cache/bonsai".into()));
        assert_eq!(c(&[]), None);
    }

    #[test]
    fn nvcc_is_on_path_a_binary_or_off() {
        let n = |pairs| Config::from_vars(vars(pairs), None).expect("valid").nvcc;
        assert_eq!(n(&[]), NvccChoice::OnPath);
        assert_eq!(n(&[(NVCC_ENV, "/opt/nvcc")]), NvccChoice::At("/opt/nvcc".into()));
        assert_eq!(n(&[(NVCC_ENV, "OFF")]), NvccChoice::Off);
    }

    #[test]
    fn every_key_is_documented_and_settable() {
        for (key, doc) in KEYS {
            assert!(!doc.is_empty());
            let value = match *key {
                "device" | "trace_replays" => "1",
                "trace" => "kernels",
                _ => "off",
            };
            Config::default().set("test", key, value).unwrap_or_else(|e| panic!("{key}: {e}"));
        }
    }
}
