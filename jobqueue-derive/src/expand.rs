//! Code generation: the `impl Job`, or on error the errors plus a stub impl
//! so that uses of the type do not pile further errors on the real ones.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote, quote_spanned};
use syn::{Data, DeriveInput, GenericArgument, LitStr, PathArguments, Type};

use crate::attr::JobAttrs;
use crate::ctxt::Ctxt;
use crate::valid;

/// `#[derive(Job)]` on `input`.
pub fn derive(input: &DeriveInput) -> TokenStream {
    let mut cx = Ctxt::new();
    let attrs = JobAttrs::from_input(&mut cx, input);
    valid::check(&mut cx, input, &attrs);
    match (cx.check(), &attrs.job_type) {
        (Ok(()), Some(job_type)) => impl_job(input, &attrs, job_type),
        // Without a type name there is an error: `valid` reports it.
        (Ok(()), None) => fallback(input, &attrs),
        (Err(errors), _) => {
            let mut tokens = errors.to_compile_error();
            tokens.extend(fallback(input, &attrs));
            tokens
        }
    }
}

/// The path to the core crate: `crate = "..."`; else the deriving crate's
/// own dependency on `jobqueue-core`, or on the front crate `jobqueue`
/// (which re-exports it), under whatever name it gave it; else
/// `::jobqueue_core`.
fn core_path(attrs: &JobAttrs) -> TokenStream {
    use proc_macro_crate::{FoundCrate, crate_name};
    if let Some(path) = &attrs.krate {
        return path.to_token_stream();
    }
    let named = |name: String| {
        let ident = quote::format_ident!("{name}");
        quote!(::#ident)
    };
    match (crate_name("jobqueue-core"), crate_name("jobqueue")) {
        (Ok(FoundCrate::Name(name)), _) => named(name),
        // Inside jobqueue-core, which names itself `jobqueue_core`.
        (Ok(FoundCrate::Itself), _) => quote!(::jobqueue_core),
        (Err(_), Ok(FoundCrate::Name(name))) => named(name),
        (Err(_), Ok(FoundCrate::Itself)) => quote!(::jobqueue),
        (Err(_), Err(_)) => quote!(::jobqueue_core),
    }
}

/// `impl Job for Ty`, with only the constants the attribute gave, each
/// value written as (and spanned like) the checked literal.
fn impl_job(input: &DeriveInput, attrs: &JobAttrs, job_type: &LitStr) -> TokenStream {
    let priority = attrs.priority.as_ref().map(|lit| {
        let lit = lit.unsigned();
        quote!(const PRIORITY: i32 = #lit;)
    });
    let queue = attrs
        .queue
        .as_ref()
        .map(|lit| quote!(const QUEUE: &'static str = #lit;));
    let max_attempts = attrs.max_attempts.as_ref().map(|lit| {
        let lit = lit.unsigned();
        quote!(const MAX_ATTEMPTS: i32 = #lit;)
    });
    let max_payload_bytes = attrs.max_payload_bytes.as_ref().map(|lit| {
        let lit = lit.unsigned();
        quote!(const MAX_PAYLOAD_BYTES: usize = #lit;)
    });
    let retry_policy = retry_policy(attrs);
    let concurrency_key = concurrency_key(input, attrs);
    impl_block(
        input,
        attrs,
        quote! {
            const JOB_TYPE: &'static str = #job_type;
            #priority
            #queue
            #max_attempts
            #max_payload_bytes
            #retry_policy
            #concurrency_key
        },
    )
}

/// `RETRY_POLICY` when a backoff key is given; the other fields keep
/// `RetryPolicy::DEFAULT`'s values.
fn retry_policy(attrs: &JobAttrs) -> Option<TokenStream> {
    if attrs.backoff_base_ms.is_none() && attrs.backoff_max_secs.is_none() {
        return None;
    }
    let core = core_path(attrs);
    let base = match &attrs.backoff_base_ms {
        Some(lit) => {
            let lit = lit.unsigned();
            quote!(::core::time::Duration::from_millis(#lit))
        }
        None => quote!(#core::RetryPolicy::DEFAULT.base),
    };
    let max = match &attrs.backoff_max_secs {
        Some(lit) => {
            let lit = lit.unsigned();
            quote!(::core::time::Duration::from_secs(#lit))
        }
        None => quote!(#core::RetryPolicy::DEFAULT.max),
    };
    Some(quote! {
        const RETRY_POLICY: ::core::option::Option<#core::RetryPolicy> =
            ::core::option::Option::Some(#core::RetryPolicy {
                base: #base,
                max: #max,
                jitter: #core::RetryPolicy::DEFAULT.jitter,
            });
    })
}

/// `fn concurrency_key` when `concurrency_key = "field"` is given: the field's value
/// as text, or for an `Option<T>` field its value's text when there is one.
/// Spanned at the literal, so a field type without `Display` is reported
/// there.
fn concurrency_key(input: &DeriveInput, attrs: &JobAttrs) -> Option<TokenStream> {
    let key = attrs.key.as_ref()?;
    // `valid` has checked that the field exists.
    let field = valid::key_field(input, key)?;
    let mut ident = field.ident.clone()?;
    ident.set_span(key.span());
    let value = if is_option(&field.ty) {
        quote_spanned! {key.span()=>
            self.#ident
                .as_ref()
                .map(::std::string::ToString::to_string)
        }
    } else {
        quote_spanned! {key.span()=>
            ::core::option::Option::Some(::std::string::ToString::to_string(&self.#ident))
        }
    };
    Some(quote! {
        fn concurrency_key(&self) -> ::core::option::Option<::std::string::String> {
            #value
        }
    })
}

/// Whether `ty` is written `Option<T>` (any path ending so, as
/// `std::option::Option<T>`): a field that may hold no key.
fn is_option(ty: &Type) -> bool {
    let Type::Path(path) = ty else {
        return false;
    };
    if path.qself.is_some() {
        return false;
    }
    path.path.segments.last().is_some_and(|last| {
        last.ident == "Option"
            && matches!(
                &last.arguments,
                PathArguments::AngleBracketed(args)
                    if args.args.len() == 1
                        && matches!(args.args.first(), Some(GenericArgument::Type(_)))
            )
    })
}

/// After an error: an impl with a placeholder type name, so code using the
/// type as a job reports nothing more. Nothing for a union (no payload can
/// be one) or when the core crate's path is itself the error.
fn fallback(input: &DeriveInput, attrs: &JobAttrs) -> TokenStream {
    if matches!(input.data, Data::Union(_)) || attrs.bad_krate {
        return TokenStream::new();
    }
    impl_block(
        input,
        attrs,
        quote!(
            const JOB_TYPE: &'static str = "";
        ),
    )
}

/// `const _: () = { impl<..> Job for Ty<..> where .., Self: Serialize + DeserializeOwned { body } };`
fn impl_block(input: &DeriveInput, attrs: &JobAttrs, body: TokenStream) -> TokenStream {
    let core = core_path(attrs);
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let predicates = where_clause
        .map(|clause| clause.predicates.iter())
        .into_iter()
        .flatten();
    quote! {
        const _: () = {
            #[automatically_derived]
            impl #impl_generics #core::Job for #ident #ty_generics
            where
                #(#predicates,)*
                Self: #core::__private::serde::Serialize
                    + #core::__private::serde::de::DeserializeOwned,
            {
                #body
            }
        };
    }
}
