//! Fuzzing the form schema parser and the answer validator with hostile schemas and answers.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::{parse_form_schema, redact_secrets, validate_answer};
use crate::fuzzing::{corpus, json, json_object};

/// An object with `properties` (what a server sends), anything inside them.
fn form_like() -> impl Strategy<Value = Value> {
    (
        proptest::collection::vec(("\\PC{0,8}", json_object()), 0..5),
        json(),
    )
        .prop_map(|(props, required)| {
            json!({
                "type": "object",
                "properties": Value::Object(props.into_iter().collect()),
                "required": required,
            })
        })
}

/// One field of the subset the dialog renders, with an odd keyword or value now and then: the
/// schemas that get past the parser, so the validator is fuzzed too.
fn field_schema() -> impl Strategy<Value = Value> {
    let bound = prop_oneof![
        4 => Just(Value::Null),
        4 => (0u8..20).prop_map(Value::from),
        1 => Just(json!(-1)),
        1 => Just(json!(2.5)),
        1 => json(),
    ];
    let field = prop_oneof![
        (bound.clone(), bound.clone(), proptest::option::of(proptest::sample::select(vec!["email", "uri", "date", "date-time", "password"])))
            .prop_map(|(min, max, format)| object_without_nulls(json!({"type": "string", "minLength": min, "maxLength": max, "format": format}))),
        (any::<bool>(), bound.clone(), bound.clone()).prop_map(|(integer, min, max)| object_without_nulls(json!({
            "type": if integer { "integer" } else { "number" }, "minimum": min, "maximum": max
        }))),
        json().prop_map(|default| json!({"type": "boolean", "default": default})),
        proptest::collection::vec("\\PC{0,6}", 0..4)
            .prop_map(|choices| json!({"type": "string", "enum": choices})),
        proptest::collection::vec(("\\PC{0,6}", "\\PC{0,6}"), 0..4).prop_map(|choices| json!({
            "type": "string",
            "oneOf": choices.into_iter().map(|(c, t)| json!({"const": c, "title": t})).collect::<Vec<_>>()
        })),
        (proptest::collection::vec("\\PC{0,6}", 0..4), bound.clone()).prop_map(|(choices, max)| json!({
            "type": "array", "items": {"type": "string", "enum": choices}, "maxItems": max
        })).prop_map(object_without_nulls),
    ];
    (
        field,
        proptest::option::weighted(0.15, (crate::fuzzing::key(), json())),
    )
        .prop_map(|(mut field, odd)| {
            if let (Some((key, value)), Some(object)) = (odd, field.as_object_mut()) {
                object.insert(key, value);
            }
            object_without_nulls(field)
        })
}

/// `null` members dropped (an absent keyword, not a null one).
fn object_without_nulls(mut value: Value) -> Value {
    if let Some(object) = value.as_object_mut() {
        object.retain(|_, v| !v.is_null());
    }
    value
}

/// A form the parser mostly accepts.
fn form() -> impl Strategy<Value = Value> {
    proptest::collection::vec(("[a-z]{1,6}", field_schema()), 0..5).prop_flat_map(|fields| {
        let names: Vec<String> = fields.iter().map(|(n, _)| n.clone()).collect();
        let required = proptest::sample::subsequence(names.clone(), 0..=names.len());
        (Just(fields), required).prop_map(|(fields, required)| {
            json!({
                "type": "object",
                "properties": Value::Object(fields.into_iter().collect()),
                "required": required,
            })
        })
    })
}

/// An answer's value: often one a field of the subset takes, sometimes anything.
fn plausible() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => json(),
        1 => "[a-z]{0,6}".prop_map(Value::from),
        1 => (0i64..10).prop_map(Value::from),
        1 => any::<bool>().prop_map(Value::from),
        1 => proptest::sample::select(vec![
            json!("a@example.com"), json!("https://example.com/x"), json!("2026-01-02"),
            json!("2026-01-02T03:04:05Z"), json!(2.5), json!([]), json!(["a"]),
        ]),
    ]
}

/// A value of the kind `field` asks for (its choices, its type), sometimes anything.
fn value_for(field: &Value) -> BoxedStrategy<Value> {
    let choices: Vec<Value> = field
        .get("enum")
        .and_then(Value::as_array)
        .cloned()
        .or_else(|| {
            field.get("oneOf").and_then(Value::as_array).map(|options| {
                options
                    .iter()
                    .filter_map(|o| o.get("const").cloned())
                    .collect()
            })
        })
        .unwrap_or_default();
    let typed = match field.get("type").and_then(Value::as_str) {
        _ if !choices.is_empty() => proptest::sample::select(choices).boxed(),
        Some("string") => proptest::sample::select(vec![
            json!("abc"),
            json!("a@example.com"),
            json!("https://example.com/x"),
            json!("2026-01-02"),
            json!("2026-01-02T03:04:05Z"),
            json!(""),
        ])
        .boxed(),
        Some("integer") | Some("number") => (0i64..10).prop_map(Value::from).boxed(),
        Some("boolean") => any::<bool>().prop_map(Value::from).boxed(),
        Some("array") => {
            let items: Vec<Value> = field["items"]["enum"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let n = items.len();
            proptest::sample::subsequence(items, 0..=n)
                .prop_map(Value::from)
                .boxed()
        }
        _ => plausible().boxed(),
    };
    prop_oneof![4 => typed, 1 => plausible()].boxed()
}

/// A schema, and an answer to it: for a form, a value for each field (some left out), else
/// anything.
fn schema_and_answer() -> impl Strategy<Value = (Value, Value)> {
    prop_oneof![1 => json(), 1 => form_like(), 3 => form()].prop_flat_map(|schema| {
        let fields: Vec<(String, Value)> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let answer = if fields.is_empty() {
            json().boxed()
        } else {
            fields
                .into_iter()
                .map(|(name, field)| {
                    proptest::option::weighted(0.8, value_for(&field))
                        .prop_map(move |v| v.map(|v| (name.clone(), v)))
                })
                .collect::<Vec<_>>()
                .prop_map(|pairs| Value::Object(pairs.into_iter().flatten().collect()))
                .boxed()
        };
        (Just(schema), prop_oneof![1 => json(), 4 => answer])
    })
}

/// Any schema is understood or refused with a reason, never a panic; an answer it accepts
/// holds only the form's own fields; redaction keeps the keys it was given.
fn judged(schema: &Value, answer: &Value) -> Result<(), TestCaseError> {
    let Ok(form) = parse_form_schema(schema) else {
        return Ok(());
    };
    if let Ok(accepted) = validate_answer(&form, schema, answer) {
        for key in accepted.keys() {
            prop_assert!(
                form.fields.iter().any(|f| f.name == *key),
                "{key} is no field"
            );
        }
        let redacted = redact_secrets(&form, &accepted);
        prop_assert_eq!(
            redacted.keys().collect::<Vec<_>>(),
            accepted.keys().collect::<Vec<_>>()
        );
    }
    Ok(())
}

proptest! {
    #[test]
    fn fuzz_a_schema_is_understood_or_refused_and_an_answer_judged((schema, answer) in schema_and_answer()) {
        judged(&schema, &answer)?;
    }
}

/// The committed cases: `{"schema": ..., "answer": ...}` files.
#[test]
fn fuzz_corpus_schema() {
    for (name, bytes) in corpus("schema") {
        let case: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        judged(&case["schema"], &case["answer"]).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// The generator reaches past the parser: a fuzz target that only ever met refusals would
/// test nothing of the validator.
#[test]
fn fuzz_generator_reaches_the_validator() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = schema_and_answer();
    let (mut parsed, mut accepted) = (0, 0);
    for _ in 0..1000 {
        let (schema, answer) = strategy.new_tree(&mut runner).unwrap().current();
        if let Ok(form) = parse_form_schema(&schema) {
            parsed += 1;
            accepted += usize::from(validate_answer(&form, &schema, &answer).is_ok());
        }
    }
    assert!(parsed >= 200, "only {parsed} of 1000 schemas parsed");
    assert!(accepted >= 20, "only {accepted} of 1000 answers accepted");
    eprintln!("of 1000 generated: {parsed} schemas parsed, {accepted} answers accepted");
}
