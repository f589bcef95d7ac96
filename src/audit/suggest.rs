//! Did-you-mean for names: an agent sending `customer_id` where the spec says `customerId`
//! needs the right name, not just "unknown". Case-folding and `_`/`-` removal first (the usual
//! renames), then edit distance for typos.

/// The declared name that `sent` most likely meant, if any is close enough.
pub fn did_you_mean<'a>(
    sent: &str,
    declared: impl Iterator<Item = &'a str> + Clone,
) -> Option<String> {
    let folded = fold(sent);
    if let Some(hit) = declared.clone().find(|d| fold(d) == folded) {
        return Some(hit.to_string());
    }
    // In characters, as the distance is: a limit in bytes let a 40-character key of
    // four-byte letters "mean" any declared name of 11 characters.
    let chars = sent.chars().count();
    let limit = (chars / 3).max(1);
    let lower = sent.to_ascii_lowercase();
    declared
        // The distance is at least the difference in length (in characters): skip what cannot
        // be close without measuring it (a peer's 100 KB key name against every declared name).
        .filter(|d| d.chars().count().abs_diff(chars) <= limit)
        .filter_map(|d| {
            let distance = strsim::damerau_levenshtein(&lower, &d.to_ascii_lowercase());
            (distance <= limit).then_some((distance, d))
        })
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, d)| d.to_string())
}

/// Whether `sent` is close enough to `declared` to call it a rename, not merely suggest it:
/// the same once case, `_` and `-` are folded (`autoInit`, `auto_init`), or a typo of a name of
/// five characters or more (`graphicsElements`, `graphicsElementIds`). A one-letter key is
/// never one (Schemathesis's `I` is not `id`).
pub fn is_rename(sent: &str, declared: &str) -> bool {
    if fold(sent) == fold(declared) {
        return true;
    }
    let chars = sent.chars().count();
    chars >= 5
        && strsim::damerau_levenshtein(&sent.to_ascii_lowercase(), &declared.to_ascii_lowercase())
            <= (chars / 4).min(2)
}

fn fold(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_and_typos() {
        let declared = ["customerId", "limit", "starting_after"];
        assert_eq!(
            did_you_mean("customer_id", declared.iter().copied()).as_deref(),
            Some("customerId")
        );
        assert_eq!(
            did_you_mean("CUSTOMER-ID", declared.iter().copied()).as_deref(),
            Some("customerId")
        );
        assert_eq!(
            did_you_mean("limt", declared.iter().copied()).as_deref(),
            Some("limit")
        );
        assert_eq!(
            did_you_mean("startingAfter", declared.iter().copied()).as_deref(),
            Some("starting_after")
        );
        assert_eq!(did_you_mean("page", declared.iter().copied()), None);
        assert!(is_rename("autoInit", "auto_init"));
        assert!(is_rename("graphicsElements", "graphicsElementIds"));
        assert!(!is_rename("I", "id"));
        assert!(!is_rename("names", "id"));
        // Schemathesis's keys: far from every name, counted in characters, not bytes.
        let declared = ["description", "sha", "name", "title"];
        for key in ["𝓣𝓱𝓮 𝓺𝓾𝓲𝓬𝓴 𝓫𝓻𝓸𝔀𝓷 𝓯𝓸𝔁 𝓳𝓾𝓶𝓹𝓼", "򊔂𵭖ª", "𓤷񊔯򠆺"]
        {
            assert_eq!(did_you_mean(key, declared.iter().copied()), None, "{key}");
        }
    }
}
