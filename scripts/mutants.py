#!/usr/bin/env python3
"""Break each finding-kind check in turn and show that the integration tests go red.

Usage: python3 scripts/mutants.py [kind ...]   (run from the repository root)
Each mutation is reverted after its test run, also on failure."""
import subprocess, sys
muts = [
 ("unknown_operation", "src/audit.rs", "Kind::UnknownOperation, Location::Path", "Kind::MethodNotAllowed, Location::Path"),
 ("method_not_allowed", "src/contract.rs", "Routed::MethodNotAllowed(allowed) => result = Route::MethodNotAllowed { allowed },", "Routed::MethodNotAllowed(_) => {}"),
 ("unknown_query_param", "src/audit/params.rs", "if !used && !unknown", "if false && !used && !unknown"),
 ("missing_required_param", "src/audit/params.rs", "None if param.required => missing.push(param),", "None if false => missing.push(param),"),
 ("param_type_mismatch", "src/audit/params.rs", "if validator.is_valid(&sent.typed) || validator.is_valid(&sent.text) {", "if true || validator.is_valid(&sent.typed) {"),
 ("unsupported_media_type", "src/audit/body.rs", "(ms == \"*\" || ms == sub ||", "(true || ms == sub ||"),
 ("invalid_json_body", "src/audit/body.rs", "Kind::InvalidJsonBody, Location::Body", "Kind::Unaudited, Location::Body"),
 ("undeclared_body_field", "src/audit/body.rs", "if *additional != Additional::Allowed {", "if *additional == Additional::Forbidden {"),
 ("body_type_mismatch", "src/audit/body.rs", "ValidationErrorKind::Type { kind } =>", "ValidationErrorKind::Type { kind } if false =>"),
 ("body_schema_violation", "src/audit/body.rs", "        _ => Some(\n            Finding::new(Kind::BodySchemaViolation", "        _ => Some(\n            Finding::new(Kind::BodyTypeMismatch"),
 ("omitted_on_replace", "src/audit/body.rs", "!p.read_only && !sent.contains_key", "!p.read_only && sent.contains_key"),
 ("unaudited", "src/audit/body.rs", "if !media.json {", "if !media.json && false {"),
 ("undeclared_status", "src/audit/response.rs", "let Some(declared) = op.responses.for_status(status) else {", "let Some(declared) = op.responses.for_status(status).or(op.responses.declared.first()) else {"),
 ("undeclared_response_media_type", "src/audit/response.rs", "let Some(media) = content_type.and_then(|ct| match_media(&declared.media, ct)) else {", "let Some(media) = content_type.and_then(|ct| match_media(&declared.media, ct)).or(declared.media.first()) else {"),
 ("response_schema_violation", "src/audit/response.rs", "            for f in schema_findings(&error, shape, value) {", "            for f in schema_findings(&error, shape, value).into_iter().filter(|f| f.kind != Kind::ResponseSchemaViolation) {"),
 ("undeclared_response_field", "src/audit/response.rs", "None if *additional == Additional::Absent => {", "None if false => {"),
 ("replace_will_drop_field", "src/audit/response.rs", "if op.method == \"GET\" && (200..300).contains(&status) {", "if false {"),
 ("replace_will_drop_field_once", "src/audit/response.rs", "seen.len() < REPORTED_LIMIT && seen.insert(key)", "seen.len() < REPORTED_LIMIT && (seen.insert(key) || true)"),
 ("response_write_only", "src/audit/response.rs", "Some(p) if p.write_only => push", "Some(p) if false && p.write_only => push"),
 ("diff_replace_hazard", "src/diff/compare.rs", "        } else if b.write == WriteSemantics::Replace {", "        } else if false {"),
 ("diff_rename", "src/diff/compare.rs", "&& similar(&p.name, &gone.name)", "&& false"),
 ("diff_nullable_widening", "src/diff/compare.rs", "if to.nullable || !from.nullable || to.ty == FieldType::Any {", "if to.ty == FieldType::Any {"),
 ("catalog_replace", "src/catalog/compare.rs", "if op.write == WriteSemantics::Replace {", "if op.write != WriteSemantics::Replace {"),
 ("catalog_missing_param", "src/catalog/compare.rs", "DefectKind::MissingParam,", "DefectKind::UnreachableArgument,"),
 ("catalog_union", "src/catalog/compare.rs", "                many => Err(format!(\"the type union {many:?} is not taught\")),", "                _many => Ok(FieldType::Any),"),
 ("response_blame", "src/finding.rs", "            | Kind::ReplaceWillDropField => Blame::Server,", "            | Kind::ReplaceWillDropField => Blame::Client,"),
]
# Guards beyond the kinds: the no-false-positive generator must catch a style reader that
# stops understanding a style
# and a broken 3.0 nullable normalization.
GUARDS = [
 ("deep_object", "src/audit/params.rs", "deep_object(param, &pairs, &mut used).or_else(", "by_name(param, &pairs, &mut used).or_else("),
 ("exploded_object", "src/audit/params.rs", "let property = param.properties.iter().any(|(p, _)| p == key);", "let property = false && param.properties.iter().any(|(p, _)| p == key);"),
 ("nullable", "src/spec/normalize.rs", "        make_nullable(schema);\n", "\n"),
]
# First contact (issue 12): each acceptance of a real-spec shape, and each lenient-load rule,
# broken in turn; `python3 scripts/mutants.py first_contact` runs the first_contact tests only.
FIRST_CONTACT = [
 ("api_key_declared", "src/audit/params.rs", "*used |= *key == name;", "*used |= false && *key == name;"),
 ("exploded_open_object", "src/contract/compile.rs", "let free = schema.get(\"additionalProperties\") != Some(&Value::Bool(false));", "let free = false;"),
 ("big_integer", "src/audit/coerce.rs", "(n.is_finite() && n.fract() == 0.0)", "(false && n.fract() == 0.0)"),
 ("allow_empty_value", "src/audit/params.rs", "if param.allow_empty && sent.text.as_str() == Some(\"\") {", "if false {"),
 ("empty_array", "src/audit/params.rs", "FieldType::Array(_) if items.len() == 1 && items[0].is_empty() => Sent {", "FieldType::Array(_) if false => Sent {"),
 ("deep_object_plain_name", "src/audit/params.rs", ".or_else(|| by_name(param, &pairs, &mut used))", ".or_else(|| None)"),
 ("method_fallback", "src/contract/router.rs", "if let Some((_, table)) = self.by_method.iter().find(|(m, _)| m == method)", "if let Some((_, table)) = self.by_method.iter().find(|(m, _)| m == method).filter(|_| false)"),
 ("route_keys", "src/audit.rs", "    !op.route_keys.is_empty()\n", "    false && !op.route_keys.is_empty()\n"),
 ("ambiguous_best_fit", "src/audit.rs", "            .is_none_or(|(_, b)| weight(&findings) < weight(b));", "            .is_none();"),
 ("pattern_skipped", "src/contract/sanitize.rs", "            if let Some(reason) = refused_pattern(&mut tried, pattern) {", "            if let Some(reason) = refused_pattern(&mut tried, pattern).filter(|_| false) {"),
 ("schema_skipped", "src/contract/sanitize.rs", "        if meta().is_valid(schema) {", "        if true || meta().is_valid(schema) {"),
 ("parameter_skipped", "src/contract/compile.rs", "                    open_query = true;", "                    open_query = false;"),
 ("strict", "src/contract/compile.rs", "    if options.strict\n", "    if false && options.strict\n"),
 ("one_of_overlap", "src/spec/readings.rs", "            if renamable_one_of(map)\n", "            if false\n"),
 ("typed_enum", "src/spec/readings.rs", "            if let Some(fix) = typed_enum(map) {", "            if let Some(fix) = typed_enum(map).filter(|_| false) {"),
 ("path_string_with_comma", "src/audit/params.rs", "param.json_content || !matches!(param.summary.ty, FieldType::Array(_) | FieldType::Object);", "param.json_content || false;"),
 ("repeated_array_property", "src/audit/params.rs", "(Some(Value::Array(items)), Value::Array(more)) => items.extend(more),", "(Some(Value::Array(_)), Value::Array(_)) => {}"),
 ("object_item_as_json", "src/audit/params.rs", "json @ Value::Object(_) => Value::Array(vec![json]),", "json @ Value::Object(_) => json,"),
 ("required_free_form", "src/audit/params.rs", "missing.retain(|p| !(p.free_form && is_exploded_object(p)));", "missing.retain(|p| !(false && is_exploded_object(p)));"),
 ("json_content_not_split", "src/audit/params.rs", "param.json_content || !matches!(param.summary.ty, FieldType::Array(_) | FieldType::Object);", "!matches!(param.summary.ty, FieldType::Array(_) | FieldType::Object);"),
 ("own_name_first", "src/audit/params.rs", "if property && op.param(Location::Query, key).is_none() {", "if property {"),
 ("other_templates", "src/audit.rs", "            if weight(&findings).0 >= Some(crate::finding::Severity::Error) {", "            if false {"),
 ("suffix_fallback", "src/contract/router.rs", "                if refused || partial {", "                if refused {"),
 ("pointer_as_written", "src/contract/compile.rs", "        warning.pointer = spec.pointer_as_written(&warning.pointer);", "        warning.pointer = warning.pointer.clone();"),
 ("adjacent_params", "src/contract/router.rs", "(true, true) => value.rfind('.').unwrap_or(value.len()),", "(true, true) => value.len(),"),
]
def run_mutations(mutations, names, test_filter):
    """Apply each mutation alone, run the integration tests (filtered), report, revert."""
    for name, path, old, new in mutations:
        if names and name not in names: continue
        src = open(path).read()
        assert src.count(old) == 1, (name, src.count(old))
        open(path, 'w').write(src.replace(old, new))
        try:
            r = subprocess.run(["cargo", "test", "-q", "--test", "integration", *test_filter], capture_output=True, text=True)
            out = r.stdout + r.stderr
            failed = [l for l in out.splitlines() if l.startswith("    integration::")]
            status = "RED" if r.returncode else "still GREEN"
            if "error[" in out or "could not compile" in out: status = "DOES NOT COMPILE"
            print(f"{name}: {status} {failed}", flush=True)
        finally:
            open(path, 'w').write(src)

# `mutants.py [kind ...]`: the finding kinds (all, or those named); `mutants.py guards`;
# `mutants.py first_contact [name ...]`.
if __name__ == "__main__":
    which = sys.argv[1:]
    if which[:1] == ["guards"]:
        run_mutations(GUARDS, [], [])
    elif which[:1] == ["first_contact"]:
        run_mutations(FIRST_CONTACT, which[1:], ["first_contact"])
    else:
        run_mutations(muts, which, [])
