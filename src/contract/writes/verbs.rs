//! The action verbs a PUT's path can end in. A PUT that no GET shows and whose template ends in
//! `reset-password`, `lock` or `:cancel` performs an action; its body is the action's parameters,
//! not a state, so what it leaves out erases nothing (Keycloak's reset-password, issue 66).

/// Words that name something the server does, not a state the body describes, in four kinds.
/// Left out on purpose, as they name a write of the resource itself, whole: `update`, `edit`,
/// `set`, `save`, `replace`, `put`, `upsert`, `modify`, `change`, `write`, `create`, `add`,
/// `apply`, `configure`, and `scale` (Kubernetes' `/scale` is a replace of the Scale object).
/// ErsatzTV's `/api/ffmpeg/profiles/update` writes every field: it stays a replace.
#[rustfmt::skip] // One line per kind reads better than rustfmt's one word per line.
pub(super) const ACTION_VERBS: &[&str] = &[
    // A transition of the resource's state.
    "abort", "accept", "acknowledge", "activate", "approve", "archive", "cancel", "close",
    "complete", "confirm", "deactivate", "decline", "demote", "disable", "dismiss", "enable",
    "lock", "merge", "pause", "promote", "publish", "reject", "reopen", "restart", "restore",
    "resume", "start", "stop", "submit", "suspend", "terminate", "unarchive", "unlock",
    "unpublish", "unsuspend", "verify",
    // A job run or a message sent.
    "execute", "export", "import", "ping", "redeliver", "refresh", "rerequest", "rerun", "retry",
    "run", "send", "sync", "test", "trigger", "validate",
    // A relation made or unmade, or the resource moved.
    "assign", "block", "copy", "follow", "invite", "join", "leave", "move", "mute", "pin",
    "star", "subscribe", "transfer", "trust", "unassign", "unblock", "unfollow", "unmute", "unpin",
    "unstar", "unsubscribe", "untrust",
    // A credential or a session turned.
    "logout", "reset", "revoke", "rotate",
];

/// The action `route` (a template's path, without its `?`/`#` part) ends in: its last segment,
/// or that segment's Google-style `:verb` suffix (`/v1/{name}:cancel`), when the first of its
/// words (split on `-`, `_` and camelCase) is an action verb. A parameter is no verb.
pub(super) fn action_segment(route: &str) -> Option<&str> {
    let last = route.trim_end_matches('/').rsplit('/').next()?;
    let segment = match last.rsplit_once(':') {
        Some((_, suffix)) => suffix,
        None => last,
    };
    if segment.contains(['{', '}']) {
        return None;
    }
    let first = first_word(segment)?;
    ACTION_VERBS
        .contains(&first.to_ascii_lowercase().as_str())
        .then_some(segment)
}

/// The first word of a segment: up to a `-` or `_`, or to the next capital after a lower-case
/// letter or digit (`resetPassword` is `reset`, `HTTPTest` is `HTTPTest`).
fn first_word(segment: &str) -> Option<&str> {
    let segment = segment.trim_start_matches(['-', '_']);
    let mut prev_lower = false;
    for (at, c) in segment.char_indices() {
        if c == '-' || c == '_' || (c.is_ascii_uppercase() && prev_lower) {
            return Some(&segment[..at]);
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
    }
    (!segment.is_empty()).then_some(segment)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_last_segment_whose_first_word_is_an_action_verb_is_an_action() {
        for (route, segment) in [
            ("/{realm}/users/{id}/reset-password", "reset-password"),
            ("/v1/{name}:cancel", "cancel"),
            ("/v1/projects/{p}/jobs/{job}:cancel", "cancel"),
            ("/users/{id}/resetPassword", "resetPassword"),
            ("/users/{id}/reset_password", "reset_password"),
            ("/repos/{o}/{r}/issues/{n}/lock", "lock"),
            ("/repos/{o}/{r}/pulls/{n}/merge-async", "merge-async"),
            ("/jobs/{id}/Cancel/", "Cancel"),
        ] {
            assert_eq!(action_segment(route), Some(segment), "{route}");
        }
    }

    /// The near twins: a write of the resource itself, a parameter last, a verb not first, a
    /// plural or a participle (a state, not an action), a verb inside a word.
    #[test]
    fn writes_of_the_resource_and_parameters_are_no_action() {
        for route in [
            "/api/ffmpeg/profiles/update",
            "/api/collections/smart/update",
            "/users/{id}/updatePassword",
            "/v1/{resource}:setIamPolicy",
            "/users/{id}/password-reset",
            "/jobs/{cancel}",
            "/jobs/cancel/{id}",
            "/v1/{name}",
            "/runs",
            "/app/installations/{id}/suspended",
            "/users/{id}/restarts",
            "/testing",
            "/",
            "",
        ] {
            assert_eq!(action_segment(route), None, "{route}");
        }
    }

    #[test]
    fn words_split_on_dashes_underscores_and_case() {
        assert_eq!(first_word("reset-password"), Some("reset"));
        assert_eq!(first_word("reset_password"), Some("reset"));
        assert_eq!(first_word("resetPassword"), Some("reset"));
        assert_eq!(first_word("Reset"), Some("Reset"));
        assert_eq!(first_word("HTTPTest"), Some("HTTPTest"));
        assert_eq!(first_word("cancel2fa"), Some("cancel2fa"));
    }

    /// Lower-case words without repeats, none of the words that name a write of the resource.
    #[test]
    fn the_verb_list_holds_no_repeat_and_no_replace_word() {
        let mut sorted = ACTION_VERBS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), ACTION_VERBS.len());
        assert!(ACTION_VERBS.iter().all(|w| *w == w.to_ascii_lowercase()));
        for word in [
            "update",
            "edit",
            "set",
            "save",
            "replace",
            "put",
            "upsert",
            "modify",
            "change",
            "write",
            "create",
            "add",
            "apply",
            "configure",
            "scale",
        ] {
            assert!(!ACTION_VERBS.contains(&word), "{word}");
        }
    }
}
