//! How command lines spell the lab's words: clap's value parsers for the
//! [`crate::vocabulary`] types, so that `--help` lists their values and a
//! wrong one is refused with them. The command lines' edge, and the only
//! place clap meets the vocabulary.

use crate::vocabulary::{FenceMode, LeaseStoreKind};
use clap::builder::{PossibleValuesParser, TypedValueParser};

/// `--mode fenced-scope`: a resource mode, by [`FenceMode::cli_name`].
pub fn fence_mode() -> impl TypedValueParser<Value = FenceMode> {
    PossibleValuesParser::new(FenceMode::ALL.map(FenceMode::cli_name)).map(|text| text.parse::<FenceMode>().expect("a possible value is a mode"))
}

/// `--lease-backend etcd`: a lease store, by [`LeaseStoreKind::name`].
pub fn lease_store() -> impl TypedValueParser<Value = LeaseStoreKind> {
    PossibleValuesParser::new(LeaseStoreKind::ALL.map(LeaseStoreKind::name))
        .map(|text| text.parse::<LeaseStoreKind>().expect("a possible value is a lease store"))
}
