//! Reading `#[job(...)]`: which keys were given, with what literals, each
//! kept with its tokens so later errors can point at it.
//!
//! This module checks the shape (known keys, given once, `key = literal` of
//! the right kind); `valid.rs` checks the values.

use proc_macro2::{TokenStream, TokenTree};
use quote::{ToTokens, TokenStreamExt};
use syn::parse::{Parse, ParseStream};
use syn::{Attribute, DeriveInput, Lit, LitInt, LitStr, MacroDelimiter, Meta, Path, Token};

use crate::ctxt::Ctxt;
use crate::symbol::{self, Symbol};

/// How the missing or misused attribute should look.
pub const CORRECT_FORM: &str =
    "help: the correct format looks like `#[job(type = \"email.send\")]`";

/// What `#[job(...)]` said about the type.
#[derive(Default)]
pub struct JobAttrs {
    /// The first well-formed `#[job(...)]`, for errors about what it lacks.
    pub first: Option<Attribute>,
    /// A `#[job]` that was not a list was reported; what it lacks is not.
    pub malformed: bool,
    /// Keys written, valid or not (a key given with a bad value is not also "missing").
    seen: Vec<Symbol>,
    /// `type = "..."`.
    pub job_type: Option<LitStr>,
    /// `priority = N`.
    pub priority: Option<IntLit>,
    /// `queue = "..."`.
    pub queue: Option<LitStr>,
    /// `max_attempts = N`.
    pub max_attempts: Option<IntLit>,
    /// `max_payload_bytes = N`.
    pub max_payload_bytes: Option<IntLit>,
    /// `backoff_base_ms = N`.
    pub backoff_base_ms: Option<IntLit>,
    /// `backoff_max_secs = N`.
    pub backoff_max_secs: Option<IntLit>,
    /// `concurrency_key = "field"`: the field named, not yet looked up
    /// (`valid.rs` does).
    pub key: Option<LitStr>,
    /// `crate = "path"`, parsed.
    pub krate: Option<Path>,
    /// `crate = "..."` was given but is not a path.
    pub bad_krate: bool,
}

impl JobAttrs {
    /// Reads every `#[job]` on `input`, reporting shape errors to `cx`.
    pub fn from_input(cx: &mut Ctxt, input: &DeriveInput) -> Self {
        let mut attrs = JobAttrs::default();
        for attr in &input.attrs {
            if attr.path() != symbol::JOB {
                continue;
            }
            match &attr.meta {
                Meta::List(list) => {
                    if !matches!(list.delimiter, MacroDelimiter::Paren(_)) {
                        cx.error_spanned_by(
                            attr,
                            format!("`#[job]` takes its keys in parentheses\n{CORRECT_FORM}"),
                        );
                        attrs.malformed = true;
                        continue;
                    }
                    if attrs.first.is_none() {
                        attrs.first = Some(attr.clone());
                    }
                    attrs.parse_list(cx, list.tokens.clone());
                }
                Meta::Path(_) => {
                    cx.error_spanned_by(
                        attr,
                        format!("`#[job]` needs a list of keys, at least `type`\n{CORRECT_FORM}"),
                    );
                    attrs.malformed = true;
                }
                Meta::NameValue(_) => {
                    cx.error_spanned_by(
                        attr,
                        format!(
                            "`#[job = ...]` is not supported; `#[job]` takes a list of keys\n{CORRECT_FORM}"
                        ),
                    );
                    attrs.malformed = true;
                }
            }
        }
        attrs
    }

    /// Whether `key` was written (with any value).
    pub fn has(&self, key: Symbol) -> bool {
        self.seen.contains(&key)
    }

    /// Splits the list at its top-level commas and reads each `key = value`.
    fn parse_list(&mut self, cx: &mut Ctxt, tokens: TokenStream) {
        let mut entry = TokenStream::new();
        for token in tokens {
            match &token {
                TokenTree::Punct(punct) if punct.as_char() == ',' => {
                    if entry.is_empty() {
                        cx.error_spanned_by(&token, "expected a key before this `,`");
                    } else {
                        self.parse_entry(cx, std::mem::take(&mut entry));
                    }
                }
                _ => entry.append(token),
            }
        }
        if !entry.is_empty() {
            self.parse_entry(cx, entry);
        }
    }

    /// Reads one `key = value`.
    fn parse_entry(&mut self, cx: &mut Ctxt, entry: TokenStream) {
        let mut tokens = entry.clone().into_iter();
        let key = match tokens.next() {
            Some(TokenTree::Ident(ident)) => ident,
            _ => {
                cx.error_spanned_by(
                    entry,
                    format!(
                        "expected `key = value`, where the key is one of {}",
                        Symbol::key_list()
                    ),
                );
                return;
            }
        };
        let Some(symbol) = Symbol::key(&key) else {
            cx.error_spanned_by(
                &key,
                format!(
                    "unknown key `{key}` in `#[job(...)]`; the keys are {}",
                    Symbol::key_list()
                ),
            );
            return;
        };
        if self.has(symbol) {
            cx.error_spanned_by(
                &key,
                format!("duplicate key `{key}`: each key may be given once"),
            );
            return;
        }
        self.seen.push(symbol);

        let eq = match tokens.next() {
            Some(TokenTree::Punct(punct)) if punct.as_char() == '=' => punct,
            Some(other) => {
                let rest: TokenStream = std::iter::once(other).chain(tokens).collect();
                cx.error_spanned_by(
                    rest,
                    format!("expected `=` after `{key}`, as in `{}`", symbol.example()),
                );
                return;
            }
            None => {
                cx.error_spanned_by(
                    &key,
                    format!("`{key}` needs a value, as in `{}`", symbol.example()),
                );
                return;
            }
        };
        let value: TokenStream = tokens.collect();
        if value.is_empty() {
            cx.error_spanned_by(
                eq,
                format!(
                    "expected a value after `{key} =`, as in `{}`",
                    symbol.example()
                ),
            );
            return;
        }
        let value = match syn::parse2::<Value>(value.clone()) {
            Ok(value) => value,
            Err(_) => {
                cx.error_spanned_by(
                    value,
                    format!(
                        "`{key}` must be {}, as in `{}`; constants and expressions are not accepted",
                        symbol.expected(),
                        symbol.example()
                    ),
                );
                return;
            }
        };
        self.store(cx, symbol, value);
    }

    /// Checks that the literal is of the kind `key` takes and keeps it.
    fn store(&mut self, cx: &mut Ctxt, key: Symbol, value: Value) {
        if key.takes_integer() {
            let Value {
                minus,
                lit: Lit::Int(lit),
            } = value
            else {
                return wrong_kind(cx, key, &value);
            };
            let rust_type = key.rust_type();
            if !lit.suffix().is_empty() && lit.suffix() != rust_type {
                cx.error_spanned_by(
                    &lit,
                    format!(
                        "`{key}` is an `{rust_type}`; drop the `{}` suffix, as in `{}`",
                        lit.suffix(),
                        key.example()
                    ),
                );
                return;
            }
            let int = Some(IntLit { minus, lit });
            match key {
                symbol::PRIORITY => self.priority = int,
                symbol::MAX_ATTEMPTS => self.max_attempts = int,
                symbol::BACKOFF_BASE_MS => self.backoff_base_ms = int,
                symbol::BACKOFF_MAX_SECS => self.backoff_max_secs = int,
                _ => self.max_payload_bytes = int,
            }
        } else {
            let Value {
                minus: None,
                lit: Lit::Str(lit),
            } = value
            else {
                return wrong_kind(cx, key, &value);
            };
            if !lit.suffix().is_empty() {
                cx.error_spanned_by(
                    &lit,
                    format!(
                        "unexpected suffix `{}` on the string, as in `{}`",
                        lit.suffix(),
                        key.example()
                    ),
                );
                return;
            }
            match key {
                symbol::TYPE => self.job_type = Some(lit),
                symbol::QUEUE => self.queue = Some(lit),
                symbol::KEY => self.key = Some(lit),
                _ => match lit.parse_with(Path::parse_mod_style) {
                    Ok(path) => self.krate = Some(path),
                    Err(_) => {
                        self.bad_krate = true;
                        cx.error_spanned_by(
                            &lit,
                            format!(
                                "`crate` must be a path to the jobqueue_core crate, as in `{}`; found {:?}",
                                key.example(),
                                lit.value()
                            ),
                        );
                    }
                },
            }
        }
    }
}

fn wrong_kind(cx: &mut Ctxt, key: Symbol, value: &Value) {
    cx.error_spanned_by(
        value,
        format!(
            "`{key}` must be {}, as in `{}`; found {}",
            key.expected(),
            key.example(),
            value.describe()
        ),
    );
}

/// An integer literal as written, sign included (a negative one is a range
/// error, reported by `valid.rs`, not a kind error).
pub struct IntLit {
    minus: Option<Token![-]>,
    lit: LitInt,
}

impl IntLit {
    /// The value, or `None` if it does not even fit in an `i128`.
    pub fn value(&self) -> Option<i128> {
        let magnitude = self.lit.base10_digits().parse::<i128>().ok()?;
        Some(if self.minus.is_some() {
            -magnitude
        } else {
            magnitude
        })
    }

    /// The literal without its sign, for the generated constant (once
    /// checked, a sign can only be that of `-0`).
    pub fn unsigned(&self) -> &LitInt {
        &self.lit
    }

    /// The value as written, for messages.
    pub fn text(&self) -> String {
        let sign = if self.minus.is_some() { "-" } else { "" };
        format!("{sign}{}", self.lit.base10_digits())
    }
}

impl ToTokens for IntLit {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        self.minus.to_tokens(tokens);
        self.lit.to_tokens(tokens);
    }
}

/// A value: a literal, maybe negated.
struct Value {
    minus: Option<Token![-]>,
    lit: Lit,
}

impl Value {
    fn describe(&self) -> &'static str {
        if self.minus.is_some() {
            return "a negated literal";
        }
        match &self.lit {
            Lit::Str(_) => "a string literal",
            Lit::ByteStr(_) => "a byte string literal",
            Lit::CStr(_) => "a C string literal",
            Lit::Byte(_) => "a byte literal",
            Lit::Char(_) => "a character literal",
            Lit::Int(_) => "an integer literal",
            Lit::Float(_) => "a float literal",
            Lit::Bool(_) => "a boolean",
            _ => "another kind of literal",
        }
    }
}

impl Parse for Value {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        Ok(Value {
            minus: input.parse()?,
            lit: input.parse()?,
        })
    }
}

impl ToTokens for Value {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        self.minus.to_tokens(tokens);
        self.lit.to_tokens(tokens);
    }
}
