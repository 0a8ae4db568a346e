//! What crosses to the shell and the UI from the facade: its views, its answer to an answer,
//! and its errors (the UI's types are generated from these by ts-rs).

use serde::Serialize;

use crate::ask::{AnswerError, Endpoint, Outcome};
use crate::config::ConfigError;
use crate::session::SessionState;

/// What became of an answer, and what the shell must do about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    pub outcome: Outcome,
    /// A web address the person consented to open: open it in their browser.
    pub open: Option<url::Url>,
}

/// A configured server as the main window lists it.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct ServerView {
    pub name: String,
    pub endpoint: Endpoint,
    pub trusted: bool,
    pub state: SessionState,
    /// The state's revision (see `SessionEvent::revision`).
    #[ts(type = "number")]
    pub state_revision: u64,
    /// Its questions send no desktop notification.
    pub muted: bool,
    /// For a remote server: whether the person is signed in to it, and where the tokens are
    /// kept (never the tokens).
    pub sign_in: Option<crate::mcp::oauth::SignInView>,
}

/// Where the config came from and what was wrong in it, for the UI's banner.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct ConfigInfo {
    pub path: String,
    /// The problems in the file: those the app started with, or, when `edit_rejected`, those
    /// of the last edit, which was not applied (the app runs on as it was).
    pub errors: Vec<ConfigError>,
    pub edit_rejected: bool,
    /// Things the person should know about Countersign's files, e.g. files others could read
    /// that were made private at start.
    pub notices: Vec<String>,
}

/// Errors the UI shows; crosses IPC as `{kind, message, ...}`.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum AppError {
    #[error("{message}")]
    Session { message: String },
    #[error("the arguments do not fit the tool's input schema")]
    InvalidArguments {
        message: String,
        errors: Vec<String>,
    },
    #[error("{message}")]
    Answer { message: String, error: AnswerError },
    #[error("{message}")]
    Audit { message: String },
    #[error("{message}")]
    Settings { message: String },
    #[error("{message}")]
    Gateway { message: String },
    /// Making, listing or revoking an agent's token.
    #[error("{message}")]
    Agent { message: String },
    /// Reading or writing an agent's config file, or importing into Countersign's.
    #[error("{message}")]
    AgentConfig { message: String },
    /// The file is not what was previewed or rewritten: the person must look again (or, for
    /// an undo, confirm with `force`).
    #[error("{message}")]
    ChangedOnDisk { message: String },
    /// A waiting tool call's dry run (`App::preview_call`) could not be shown.
    #[error("{message}")]
    Preview {
        message: String,
        error: crate::gateway::preview::PreviewError,
    },
}

impl From<crate::agents::ClientError> for AppError {
    fn from(e: crate::agents::ClientError) -> Self {
        match e {
            crate::agents::ClientError::Changed { message } => AppError::ChangedOnDisk { message },
            other => AppError::AgentConfig {
                message: other.to_string(),
            },
        }
    }
}

impl From<crate::session::SessionError> for AppError {
    fn from(e: crate::session::SessionError) -> Self {
        AppError::Session {
            message: e.to_string(),
        }
    }
}

impl From<AnswerError> for AppError {
    fn from(error: AnswerError) -> Self {
        AppError::Answer {
            message: error.to_string(),
            error,
        }
    }
}

impl From<crate::gateway::preview::PreviewError> for AppError {
    fn from(error: crate::gateway::preview::PreviewError) -> Self {
        AppError::Preview {
            message: error.to_string(),
            error,
        }
    }
}

impl From<crate::gateway::AgentError> for AppError {
    fn from(e: crate::gateway::AgentError) -> Self {
        AppError::Agent {
            message: e.to_string(),
        }
    }
}
