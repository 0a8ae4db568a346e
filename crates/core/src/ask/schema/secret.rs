//! Fields that look like secrets, and the answer as it may be written down.
//!
//! The MCP spec forbids servers to ask for passwords, API keys, tokens or payment credentials in
//! a form-mode elicitation, but nothing stops one from trying. Countersign flags such a field
//! when the schema is parsed (the dialog warns and masks it) and never records what was typed
//! into it: the server gets the value, the audit log and History get `{"redacted": true,
//! "length": n}`.
//!
//! # What counts as a secret
//!
//! Only fields the person types into (text and number) are flagged; a checkbox or a choice
//! among the server's own options reveals nothing the server did not already know. A field is
//! flagged when it carries `format: "password"` or `writeOnly: true`, or when its name, title or
//! description names a secret: password, passwd, pwd, passphrase, passcode, secret, token, API
//! key, private key, card number, credit card, CVV, CVC, OTP, TOTP, 2FA, one-time and recovery
//! codes (MFA, security, verification, auth, authentication, authorization, recovery, backup and
//! one-time code, authenticator), seed and recovery phrase, mnemonic, passkey, credential(s),
//! bearer, cookie, access, signing and SSH key, and (name or title only) PIN, pass and pw.
//! The form's message counts as a description of its only field to type in, when it has one
//! ([`flag_by_message`]): "Enter your GitHub token" above a field named `value`.
//!
//! Text is read as a person sees it: compatibility forms folded (NFKC: full-width letters),
//! invisible format characters dropped (`Pass\u{200B}word`), and Cyrillic and Greek letters
//! that look like Latin ones read as those (`Pаssword` with a Cyrillic `а`).
//!
//! Matching is by whole words, case-insensitively, after splitting `snake_case`, `kebab-case`,
//! `camelCase` and digits apart (`apiKey`, `API_KEY`, `x-api-key`, `cvv2` all match). A
//! term followed by a word that makes it a fact *about* the secret (`token_count`,
//! `password_hint`, `secret_name`, "password reset link") or preceded by a count word
//! (`max_token`) is not a secret, and plurals are not matched (`max_tokens`, `tokens_used`,
//! "number of tokens"). In a title or a description, which are prose, a verb after the term
//! does not make it a fact about it ("Password used to sign in" is a password; `token_type` as
//! a name is not). "PIN", "pass" and "pw" count only as the field's last word or before "code",
//! "number", "word" or "phrase" (`pin`, `card_pin`, `user_pass`, not `pin_to_top` or
//! `pass_through`), and never in a description, where they are usually verbs.

use serde_json::{Map, Value, json};

use super::{FieldKind, FormSchema};

/// Words (and word pairs) that name a secret. Each is matched as whole words.
const SECRET_TERMS: &[&[&str]] = &[
    &["password"],
    &["passwd"],
    &["pwd"],
    &["otp"],
    &["passphrase"],
    &["passcode"],
    &["secret"],
    &["token"],
    &["apikey"],
    &["api", "key"],
    &["privatekey"],
    &["private", "key"],
    &["cardnumber"],
    &["card", "number"],
    &["creditcard"],
    &["credit", "card"],
    &["cvv"],
    &["cvc"],
    // One-time and recovery codes, which open an account as a password does.
    &["totp"],
    &["2", "fa"],
    &["mfa", "code"],
    &["security", "code"],
    &["verification", "code"],
    &["auth", "code"],
    &["authentication", "code"],
    &["authorization", "code"],
    &["authenticator"],
    &["recovery", "code"],
    &["backup", "code"],
    &["one", "time", "code"],
    &["seed", "phrase"],
    &["recovery", "phrase"],
    &["mnemonic"],
    // Credentials by other names.
    &["passkey"],
    &["credential"],
    &["credentials"],
    &["bearer"],
    &["cookie"],
    &["access", "key"],
    &["signing", "key"],
    &["ssh", "key"],
];

/// A word right after a secret term that makes the field about the secret rather than the
/// secret itself: `password_hint`, `token_count`, `secret_name`, "password reset link".
const ABOUT_THE_SECRET: &[&str] = &[
    "age",
    "budget",
    "changed",
    "count",
    "counts",
    "created",
    "endpoint",
    "expiration",
    "expired",
    "expires",
    "expiry",
    "field",
    "file",
    "format",
    "hint",
    "hints",
    "id",
    "ids",
    "label",
    "length",
    "limit",
    "limits",
    "link",
    "location",
    "manager",
    "name",
    "path",
    "policy",
    "ref",
    "reference",
    "requirements",
    "reset",
    "rule",
    "rules",
    "scope",
    "scopes",
    "strength",
    "type",
    "updated",
    "uri",
    "url",
    "usage",
    "used",
];

/// Words of [`ABOUT_THE_SECRET`] that, in prose, say what is done with the secret rather than
/// name a fact about it: "Password used to sign in to your bank".
const VERBS_IN_PROSE: &[&str] = &[
    "changed", "created", "expired", "expires", "type", "updated", "used",
];

/// Short words that name a secret in a label when they end it or come before one of
/// [`SHORT_TERM_ENDS`]: `pin`, `card_pin`, `user_pass`, `pw`; elsewhere they are usually other
/// words (`pin_to_top`, `pass_through`).
const SHORT_TERMS: &[&str] = &["pin", "pass", "pw"];
const SHORT_TERM_ENDS: &[&str] = &["code", "number", "word", "phrase"];

/// Where a field's text comes from: its name, its title, or its description.
#[derive(Clone, Copy, PartialEq)]
enum Said {
    Name,
    Title,
    Description,
}

/// A word right before a secret term that makes it a quantity or an errand, not the secret:
/// `max_token`, `total_token`, "forgot password".
const COUNT_OR_ERRAND: &[&str] = &[
    "forgot",
    "forgotten",
    "max",
    "maximum",
    "min",
    "minimum",
    "num",
    "number",
    "remaining",
    "total",
];

/// Whether a field of this kind, with these annotations, is asking for a secret. `format` is
/// the raw `format` keyword (`"password"` counts, though the spec has no such format) and
/// `write_only` the raw `writeOnly` keyword.
pub(crate) fn looks_secret(
    kind: &FieldKind,
    name: &str,
    title: Option<&str>,
    description: Option<&str>,
    format: Option<&str>,
    write_only: bool,
) -> bool {
    if !matches!(kind, FieldKind::Text { .. } | FieldKind::Number { .. }) {
        return false;
    }
    if format == Some("password") || write_only {
        return true;
    }
    names_secret(&words(name), Said::Name)
        || title.is_some_and(|t| names_secret(&words(t), Said::Title))
        || description.is_some_and(|d| names_secret(&words(d), Said::Description))
}

/// A form whose message names a secret ("Enter your GitHub token") and that has one field the
/// person types into: that field is the secret, whatever it is called (`value`), and is
/// masked and kept out of the log as any other. With more than one such field the message
/// cannot say which; their own names, titles and descriptions decide.
pub fn flag_by_message(schema: &mut FormSchema, message: &str) {
    let mut typed = schema
        .fields
        .iter_mut()
        .filter(|f| matches!(f.kind, FieldKind::Text { .. } | FieldKind::Number { .. }));
    if let (Some(field), None) = (typed.next(), typed.next())
        && names_secret(&words(message), Said::Description)
    {
        field.secret = true;
    }
}

/// `words` (lowercase) name a secret, as `said`.
fn names_secret(words: &[String], said: Said) -> bool {
    let at = |i: usize| words.get(i).map(String::as_str);
    let about = |w: &str| {
        ABOUT_THE_SECRET.contains(&w) && (said == Said::Name || !VERBS_IN_PROSE.contains(&w))
    };
    for start in 0..words.len() {
        let before = start.checked_sub(1).and_then(at);
        if before.is_some_and(|w| COUNT_OR_ERRAND.contains(&w)) {
            continue;
        }
        for term in SECRET_TERMS {
            let matches = term
                .iter()
                .enumerate()
                .all(|(k, w)| at(start + k) == Some(*w));
            if matches && !at(start + term.len()).is_some_and(about) {
                return true;
            }
        }
        if said != Said::Description
            && at(start).is_some_and(|w| SHORT_TERMS.contains(&w))
            && at(start + 1).is_none_or(|w| SHORT_TERM_ENDS.contains(&w))
        {
            return true;
        }
    }
    false
}

/// Lowercase words of `text`: split at anything not a letter or digit, between letters and
/// digits, and at camelCase humps (`APIKey` -> `api`, `key`; `cardNumber2` -> `card`,
/// `number`, `2`).
fn words(text: &str) -> Vec<String> {
    use unicode_general_category::{GeneralCategory, get_general_category};
    use unicode_normalization::UnicodeNormalization;
    let chars: Vec<char> = text
        .nfkc()
        .filter(|&c| get_general_category(c) != GeneralCategory::Format)
        .map(latin_look_alike)
        .collect();
    let mut out = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            continue;
        }
        if let Some(&prev) = i.checked_sub(1).and_then(|p| chars.get(p))
            && prev.is_alphanumeric()
        {
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let hump = (prev.is_lowercase() && c.is_uppercase())
                || (prev.is_uppercase() && c.is_uppercase() && next_lower)
                || (prev.is_numeric() != c.is_numeric());
            if hump && !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
        }
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// The Latin letter a Cyrillic or Greek one is drawn like, or the letter itself: a label
/// spelled with them reads the same to the person and must to this check.
fn latin_look_alike(c: char) -> char {
    match c {
        'а' | 'α' => 'a',
        'А' | 'Α' => 'A',
        'В' | 'Β' => 'B',
        'с' | 'ϲ' => 'c',
        'С' | 'Ϲ' => 'C',
        'ԁ' => 'd',
        'е' | 'ε' => 'e',
        'Е' | 'Ε' => 'E',
        'һ' => 'h',
        'Н' | 'Η' => 'H',
        'і' | 'ι' => 'i',
        'І' | 'Ι' => 'I',
        'ј' => 'j',
        'Ј' => 'J',
        'κ' | 'к' => 'k',
        'К' | 'Κ' => 'K',
        'ӏ' => 'l',
        'М' | 'Μ' => 'M',
        'Ν' => 'N',
        'о' | 'ο' => 'o',
        'О' | 'Ο' => 'O',
        'р' | 'ρ' => 'p',
        'Р' | 'Ρ' => 'P',
        'ԛ' => 'q',
        'ѕ' => 's',
        'Ѕ' => 'S',
        'Т' | 'Τ' => 'T',
        'υ' => 'u',
        'ν' => 'v',
        'ԝ' => 'w',
        'х' | 'χ' => 'x',
        'Х' | 'Χ' => 'X',
        'у' => 'y',
        'У' | 'Υ' => 'Y',
        'Ζ' => 'Z',
        c => c,
    }
}

/// `content` as it may be written down: the value of every secret field replaced by
/// `{"redacted": true, "length": n}`, `n` in Unicode code points (for a number, the characters
/// of its JSON text). Everything else, and the key order, is kept. What goes to the server is
/// the original, never this.
pub fn redact_secrets(schema: &FormSchema, content: &Map<String, Value>) -> Map<String, Value> {
    content
        .iter()
        .map(|(key, value)| {
            let secret = schema.fields.iter().any(|f| f.secret && f.name == *key);
            let value = if secret {
                let length = match value {
                    Value::String(s) => s.chars().count(),
                    other => other.to_string().chars().count(),
                };
                json!({"redacted": true, "length": length})
            } else {
                value.clone()
            };
            (key.clone(), value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ask::schema::parse_form_schema;

    fn text() -> FieldKind {
        FieldKind::Text {
            min_length: None,
            max_length: None,
            format: None,
        }
    }

    fn integer() -> FieldKind {
        FieldKind::Number {
            integer: true,
            minimum: None,
            maximum: None,
        }
    }

    fn named(name: &str) -> bool {
        looks_secret(&text(), name, None, None, None, false)
    }

    #[test]
    fn words_split_cases_separators_and_digits() {
        assert_eq!(words("APIKey"), ["api", "key"]);
        assert_eq!(words("x-api-key"), ["x", "api", "key"]);
        assert_eq!(words("cardNumber2"), ["card", "number", "2"]);
        assert_eq!(words("GITHUB_TOKEN"), ["github", "token"]);
        assert_eq!(
            words("Your  Password (again)"),
            ["your", "password", "again"]
        );
        assert_eq!(words("cvv2"), ["cvv", "2"]);
        assert_eq!(words(""), Vec::<String>::new());
    }

    #[test]
    fn secret_names_are_flagged() {
        for name in [
            "password",
            "Password",
            "PASSWORD",
            "new_password",
            "confirmPassword",
            "password_confirmation",
            "password2",
            "passwd",
            "db-passphrase",
            "passcode",
            "secret",
            "client_secret",
            "webhookSecret",
            "secret_key",
            "token",
            "access_token",
            "GITHUB_TOKEN",
            "refreshToken",
            "api_key",
            "apiKey",
            "apikey",
            "APIKey",
            "x-api-key",
            "openai_api_key",
            "private_key",
            "privateKey",
            "ssh private key",
            "card_number",
            "cardNumber",
            "credit_card",
            "creditCard",
            "credit card number",
            "cvv",
            "CVV2",
            "cvc",
            "pin",
            "PIN",
            "card_pin",
            "pin_code",
            "pinNumber",
            "pwd",
            "db_pwd",
            "pw",
            "user_pass",
            "otp",
            "otp_code",
            "totp",
            "2fa_code",
            "mfa_code",
            "security_code",
            "Security code",
            "verification_code",
            "auth_code",
            "recovery_code",
            "backup_code",
            "seed_phrase",
            "mnemonic",
            "passkey",
            "credentials",
            "session_cookie",
            "bearer",
            "aws_access_key",
            "signing_key",
            "ssh_key",
            "Pаssword",
            "Pass\u{200B}word",
            "ＰＡＳＳＷＯＲＤ",
            "ѕecret",
        ] {
            assert!(named(name), "{name} should be flagged");
        }
    }

    #[test]
    fn look_alikes_and_facts_about_secrets_are_not() {
        for name in [
            "tokens_used",
            "token_count",
            "max_tokens",
            "maxToken",
            "total_tokens",
            "token_type",
            "token_name",
            "token_limit",
            "password_hint",
            "passwordLength",
            "password_reset_email",
            "forgot_password",
            "secret_name",
            "secretary",
            "secrets_path",
            "keyboard",
            "key",
            "primary_key",
            "sort key",
            "api_endpoint",
            "card_type",
            "credit_card_expiry",
            "access_key_id",
            "credential_name",
            "cookie_policy",
            "tokenizer",
            "passage",
            "pinned",
            "spinner",
            "pin_to_top",
            "shipping",
            "topic",
            "name",
            "pass_through",
            "passenger",
            "compass",
        ] {
            assert!(!named(name), "{name} should not be flagged");
        }
    }

    /// A text field with this title and description.
    fn labelled(title: Option<&str>, description: Option<&str>) -> bool {
        looks_secret(&text(), "f1", title, description, None, false)
    }

    #[test]
    fn title_and_description_count_but_pin_only_in_labels() {
        assert!(labelled(Some("GitHub token"), None));
        assert!(labelled(Some("Card PIN"), None));
        assert!(labelled(
            None,
            Some("Your database password, as set by your admin")
        ));
        assert!(labelled(None, Some("The OpenAI API key to use")));
        assert!(!labelled(
            Some("Email"),
            Some("We send a password reset link here")
        ));
        assert!(!labelled(
            None,
            Some("The number of tokens the answer may use")
        ));
        assert!(!labelled(None, Some("Pin this note to the top")));
        assert!(!labelled(Some("Pin to top"), None));
        // Prose: a verb after the term does not make it a fact about the secret.
        assert!(labelled(
            Some("Password used to sign in to your bank"),
            None
        ));
        assert!(labelled(None, Some("The token used by the CLI")));
        assert!(labelled(
            None,
            Some("Enter the OTP from your authenticator")
        ));
        assert!(!labelled(Some("Password hint"), None));
        assert!(!labelled(None, Some("Pass the name of the branch")));
    }

    #[test]
    fn format_password_and_write_only_flag_any_name() {
        assert!(looks_secret(
            &text(),
            "x",
            None,
            None,
            Some("password"),
            false
        ));
        assert!(looks_secret(&text(), "x", None, None, None, true));
        assert!(!looks_secret(
            &text(),
            "x",
            None,
            None,
            Some("email"),
            false
        ));
    }

    #[test]
    fn only_typed_fields_are_flagged() {
        assert!(looks_secret(&integer(), "cvv", None, None, None, false));
        assert!(!looks_secret(
            &integer(),
            "token_count",
            None,
            None,
            None,
            false
        ));
        assert!(!looks_secret(
            &FieldKind::Boolean,
            "remember_password",
            None,
            None,
            None,
            true
        ));
        let select = FieldKind::SingleSelect { options: vec![] };
        assert!(!looks_secret(&select, "token", None, None, None, false));
    }

    #[test]
    fn the_message_names_the_secret_of_a_form_with_one_field_to_type_in() {
        let one = json!({"type": "object", "properties": {
            "value": {"type": "string"}, "remember": {"type": "boolean"}}});
        let flagged = |raw: &Value, message: &str| -> Vec<String> {
            let mut form = parse_form_schema(raw).unwrap();
            flag_by_message(&mut form, message);
            form.fields
                .into_iter()
                .filter(|f| f.secret)
                .map(|f| f.name)
                .collect()
        };
        assert_eq!(flagged(&one, "Enter your GitHub token"), ["value"]);
        assert_eq!(flagged(&one, "Paste the API key for the deploy"), ["value"]);
        assert!(flagged(&one, "How many tokens may the summary use?").is_empty());
        assert!(flagged(&one, "Name the new ticket").is_empty());
        // Two fields to type in: the message cannot say which is the secret.
        let two = json!({"type": "object", "properties": {
            "value": {"type": "string"}, "note": {"type": "string"}}});
        assert!(flagged(&two, "Enter your GitHub token").is_empty());
    }

    #[test]
    fn parsed_schema_carries_the_flag() {
        let form = parse_form_schema(&json!({
            "type": "object",
            "properties": {
                "user": {"type": "string", "title": "User name"},
                "pw": {"type": "string", "title": "Password"},
                "masked": {"type": "string", "format": "password"},
                "hidden": {"type": "string", "writeOnly": true},
                "pin": {"type": "integer"},
                "tokens_used": {"type": "integer"},
                "remember_password": {"type": "boolean"}
            }
        }))
        .unwrap();
        let flagged: Vec<_> = form
            .fields
            .iter()
            .filter(|f| f.secret)
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(flagged, ["pw", "masked", "hidden", "pin"]);
        // `format: "password"` is not a format the answer must fit: any text is fine.
        let raw = json!({"type": "object", "properties": {"masked": {"type": "string", "format": "password"}}});
        let masked = parse_form_schema(&raw).unwrap();
        assert!(
            crate::ask::schema::validate_answer(&masked, &raw, &json!({"masked": "hunter2 !"}))
                .is_ok()
        );
        assert_eq!(
            form.fields[2].kind,
            FieldKind::Text {
                min_length: None,
                max_length: None,
                format: None
            }
        );
    }

    #[test]
    fn redaction_replaces_only_secret_values_with_their_length() {
        let form = parse_form_schema(&json!({
            "type": "object",
            "properties": {
                "user": {"type": "string"},
                "password": {"type": "string"},
                "pin": {"type": "integer"},
                "remember": {"type": "boolean"}
            }
        }))
        .unwrap();
        let content =
            json!({"user": "ana", "password": "pässwörd-123", "pin": 4711, "remember": true});
        let redacted = redact_secrets(&form, content.as_object().unwrap());
        assert_eq!(
            Value::Object(redacted.clone()),
            json!({
                "user": "ana",
                "password": {"redacted": true, "length": 12},
                "pin": {"redacted": true, "length": 4},
                "remember": true
            })
        );
        assert_eq!(
            redacted.keys().collect::<Vec<_>>(),
            ["user", "password", "pin", "remember"]
        );
        assert!(!Value::Object(redacted).to_string().contains("pässwörd"));
        // A form without secrets is written as answered.
        let plain = parse_form_schema(
            &json!({"type": "object", "properties": {"user": {"type": "string"}}}),
        )
        .unwrap();
        let answer = json!({"user": "ana"});
        assert_eq!(
            redact_secrets(&plain, answer.as_object().unwrap()),
            *answer.as_object().unwrap()
        );
    }
}
