//! What `-hf OWNER/REPO[:QUANT]` and `--hf-file` name, and which GGUF file of a repository they
//! choose, with llama.cpp's rules.

use anyhow::bail;

/// `OWNER/REPO[:QUANT]` as given to `-hf`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoSpec {
    /// `OWNER/REPO`.
    pub repo: String,
    /// The quantization tag after `:`, as typed (`Q1_0`, `pq2_0`).
    pub quant: Option<String>,
}

impl RepoSpec {
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let (repo, quant) = match text.split_once(':') {
            Some((repo, quant)) => (repo, Some(quant)),
            None => (text, None),
        };
        let valid_part = |part: &str| {
            !part.is_empty()
                && part != "."
                && part != ".."
                && part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        match repo.split_once('/') {
            Some((owner, name)) if valid_part(owner) && valid_part(name) => {}
            _ => bail!("-hf wants OWNER/REPO[:QUANT] (e.g. prism-ml/Bonsai-8B-gguf:Q1_0), not {text:?}"),
        }
        if quant.is_some_and(|q| q.is_empty() || q.contains(['/', ':'])) {
            bail!("-hf {text:?}: the quantization after ':' is empty or malformed (e.g. :Q1_0)");
        }
        Ok(RepoSpec { repo: repo.to_string(), quant: quant.map(str::to_string) })
    }
}

/// Which file the user asked for.
#[derive(Clone, Copy, Debug)]
pub struct Want<'a> {
    /// `--hf-file`: this exact name.
    pub file: Option<&'a str>,
    /// `:QUANT`: the GGUF file whose name holds it.
    pub quant: Option<&'a str>,
}

pub fn is_gguf(name: &str) -> bool {
    name.to_ascii_lowercase().ends_with(".gguf")
}

/// A multimodal projector, never the model itself (llama.cpp skips these too).
fn is_projector(name: &str) -> bool {
    base_name(name).to_ascii_lowercase().contains("mmproj")
}

fn base_name(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// `-00001-of-00003.gguf`: one part of a split model.
fn split_part(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let Some(stem) = lower.strip_suffix(".gguf") else { return false };
    let bytes = stem.as_bytes();
    // "-NNNNN-of-NNNNN" is 15 bytes at the end of the stem.
    if bytes.len() < 15 {
        return false;
    }
    let tail = &bytes[bytes.len() - 15..];
    let digits = |r: std::ops::Range<usize>| tail[r].iter().all(u8::is_ascii_digit);
    tail[0] == b'-' && digits(1..6) && &tail[6..10] == b"-of-" && digits(10..15)
}

/// Whether `quant` occurs in `name` as a whole tag: not followed or preceded by a letter, a digit
/// or `_` (so `Q1_0` is whole in `m-Q1_0.gguf`, not in `m-Q1_0_g128.gguf`).
fn whole_tag(name: &str, quant: &str) -> bool {
    let (name, quant) = (name.to_ascii_lowercase(), quant.to_ascii_lowercase());
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    name.match_indices(&quant).any(|(at, _)| {
        !word(name[..at].chars().next_back()) && !word(name[at + quant.len()..].chars().next())
    })
}

fn list(names: &[&str]) -> String {
    names.join(", ")
}

/// The file of `repo` (whose files are `names`) that `want` names:
/// - `--hf-file`: that exact name;
/// - `:QUANT`: the GGUF whose name contains it, case-insensitively; when several do, the one
///   holding it as a whole tag;
/// - neither: the repository's one GGUF file.
///
/// Errors list the candidates and how to pick one. Split GGUFs are refused.
pub fn choose<'a>(repo: &str, names: &[&'a str], want: Want) -> anyhow::Result<&'a str> {
    let ggufs: Vec<&str> = names.iter().copied().filter(|n| is_gguf(n) && !is_projector(n)).collect();
    let chosen = if let Some(file) = want.file {
        match names.iter().find(|n| **n == file) {
            Some(name) => *name,
            None if ggufs.is_empty() => bail!("{repo} has no file {file:?} and no GGUF files"),
            None => bail!("{repo} has no file {file:?}; its GGUF files: {}", list(&ggufs)),
        }
    } else if ggufs.is_empty() {
        bail!("{repo} has no GGUF file (files: {})", if names.is_empty() { "none".into() } else { list(names) })
    } else if let Some(quant) = want.quant {
        let q = quant.to_ascii_lowercase();
        let matches: Vec<&str> = ggufs.iter().copied().filter(|n| n.to_ascii_lowercase().contains(&q)).collect();
        let whole: Vec<&str> = matches.iter().copied().filter(|n| whole_tag(n, quant)).collect();
        let first_parts: Vec<&str> = matches.iter().copied().filter(|n| !split_part(n)).collect();
        match (matches.as_slice(), whole.as_slice(), first_parts.as_slice()) {
            ([], _, _) => bail!("{repo} has no GGUF file matching :{quant}; its GGUF files: {}", list(&ggufs)),
            ([one], _, _) | (_, [one], _) | (_, _, [one]) => *one,
            // Only the parts of one split model: refused below, by name.
            ([first, ..], _, []) => *first,
            _ => bail!(
                "{repo}: :{quant} matches several GGUF files: {}; pick one with --hf-file NAME",
                list(&matches)
            ),
        }
    } else {
        match ggufs.as_slice() {
            [one] => *one,
            _ => bail!(
                "{repo} has {} GGUF files: {}; pick one with -hf {repo}:QUANT (e.g. :{}) or --hf-file NAME",
                ggufs.len(),
                list(&ggufs),
                example_quant(&ggufs).unwrap_or("Q1_0")
            ),
        }
    };
    if split_part(chosen) {
        bail!(
            "{repo}: {chosen} is one part of a split GGUF (-NNNNN-of-NNNNN), which bonsai does not load yet; \
             merge the parts with llama.cpp's `llama-gguf-split --merge` and use -m, or pick a single-file GGUF"
        );
    }
    Ok(chosen)
}

/// A quantization tag to suggest: the last `-` or `.` separated part of a GGUF file's stem.
fn example_quant<'a>(ggufs: &[&'a str]) -> Option<&'a str> {
    let stem = base_name(ggufs.first()?);
    let stem = &stem[..stem.len() - ".gguf".len()];
    stem.rsplit(['-', '.']).next().filter(|tag| !tag.is_empty() && *tag != stem)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPO: &str = "prism-ml/Bonsai-8B-gguf";

    fn want<'a>(file: Option<&'a str>, quant: Option<&'a str>) -> Want<'a> {
        Want { file, quant }
    }

    #[test]
    fn specs_parse_and_bad_ones_say_the_form() {
        assert_eq!(
            RepoSpec::parse("prism-ml/Bonsai-8B-gguf").unwrap(),
            RepoSpec { repo: REPO.into(), quant: None }
        );
        assert_eq!(
            RepoSpec::parse("prism-ml/Bonsai-8B-gguf:Q1_0").unwrap(),
            RepoSpec { repo: REPO.into(), quant: Some("Q1_0".into()) }
        );
        for bad in ["Bonsai-8B-gguf", "a/b/c", "/b", "a/", "a/..", "a b/c", "a/b:", "a/b:x/y", ""] {
            assert!(RepoSpec::parse(bad).is_err(), "{bad:?} should be refused");
        }
        let err = RepoSpec::parse("Bonsai").unwrap_err().to_string();
        assert!(err.contains("OWNER/REPO[:QUANT]"), "{err}");
    }

    #[test]
    fn quant_tags_match_case_insensitively() {
        let names = ["README.md", "Bonsai-8B-Q1_0.gguf", "Bonsai-8B-PQ2_0.gguf", "config.json"];
        assert_eq!(choose(REPO, &names, want(None, Some("q1_0"))).unwrap(), "Bonsai-8B-Q1_0.gguf");
        assert_eq!(choose(REPO, &names, want(None, Some("PQ2_0"))).unwrap(), "Bonsai-8B-PQ2_0.gguf");
        let err = choose(REPO, &names, want(None, Some("Q4_K_M"))).unwrap_err().to_string();
        assert!(err.contains("no GGUF file matching :Q4_K_M") && err.contains("Bonsai-8B-PQ2_0.gguf"), "{err}");
    }

    #[test]
    fn a_whole_tag_wins_over_a_longer_name_that_contains_it() {
        let names = ["m-Q2_0.gguf", "m-PQ2_0.gguf", "m-Q2_0_g128.gguf"];
        // "q2_0" is inside all three names, whole only in the first.
        assert_eq!(choose(REPO, &names, want(None, Some("Q2_0"))).unwrap(), "m-Q2_0.gguf");
        let names = ["m-Q2_0-a.gguf", "m-Q2_0-b.gguf"];
        let err = choose(REPO, &names, want(None, Some("Q2_0"))).unwrap_err().to_string();
        assert!(err.contains("matches several GGUF files: m-Q2_0-a.gguf, m-Q2_0-b.gguf"), "{err}");
        assert!(err.contains("--hf-file"), "{err}");
    }

    #[test]
    fn hf_file_is_exact_and_wins_over_the_quant() {
        let names = ["a-Q1_0.gguf", "b-Q1_0.gguf"];
        assert_eq!(choose(REPO, &names, want(Some("b-Q1_0.gguf"), Some("Q9"))).unwrap(), "b-Q1_0.gguf");
        let err = choose(REPO, &names, want(Some("B-Q1_0.gguf"), None)).unwrap_err().to_string();
        assert!(err.contains("has no file \"B-Q1_0.gguf\"; its GGUF files: a-Q1_0.gguf, b-Q1_0.gguf"), "{err}");
    }

    #[test]
    fn the_single_gguf_is_chosen_and_several_are_listed() {
        let names = [".gitattributes", "model.gguf", "mmproj-model-f16.gguf"];
        assert_eq!(choose(REPO, &names, want(None, None)).unwrap(), "model.gguf", "a projector is not the model");
        let names = ["Bonsai-8B-Q1_0.gguf", "Bonsai-8B-PQ2_0.gguf"];
        let err = choose(REPO, &names, want(None, None)).unwrap_err().to_string();
        assert_eq!(
            err,
            "prism-ml/Bonsai-8B-gguf has 2 GGUF files: Bonsai-8B-Q1_0.gguf, Bonsai-8B-PQ2_0.gguf; \
             pick one with -hf prism-ml/Bonsai-8B-gguf:QUANT (e.g. :Q1_0) or --hf-file NAME"
        );
        let err = choose(REPO, &["README.md"], want(None, None)).unwrap_err().to_string();
        assert!(err.contains("has no GGUF file (files: README.md)"), "{err}");
    }

    #[test]
    fn split_ggufs_are_refused_clearly() {
        let names = ["big-Q1_0-00001-of-00002.gguf", "big-Q1_0-00002-of-00002.gguf"];
        let err = choose(REPO, &names, want(None, Some("Q1_0"))).unwrap_err().to_string();
        assert!(err.contains("one part of a split GGUF") && err.contains("llama-gguf-split --merge"), "{err}");
        let err = choose(REPO, &names[..1], want(None, None)).unwrap_err().to_string();
        assert!(err.contains("split GGUF"), "{err}");
        assert!(split_part("x-00001-of-00003.gguf") && !split_part("x-0001-of-0003.gguf") && !split_part("x.gguf"));
    }

    #[test]
    fn files_in_folders_match_by_name() {
        let names = ["Q1_0/model-Q1_0.gguf", "PQ2_0/model-PQ2_0.gguf"];
        assert_eq!(choose(REPO, &names, want(None, Some("pq2_0"))).unwrap(), "PQ2_0/model-PQ2_0.gguf");
    }
}
