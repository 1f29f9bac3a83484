//! Path rules shared by both backends.

use crate::{Error, Result};

/// Checks that `path` is absolute, has no empty, `.` or `..` segment, no trailing `/`
/// (except the root) and no NUL character.
pub(crate) fn validate_path(path: &str) -> Result<()> {
    let bad = |why: &str| Err(Error::BadArguments(format!("path {path:?} {why}")));
    if !path.starts_with('/') {
        return bad("is not absolute");
    }
    if path == "/" {
        return Ok(());
    }
    if path.ends_with('/') {
        return bad("ends with '/'");
    }
    if path.contains('\0') {
        return bad("contains a NUL character");
    }
    for segment in path[1..].split('/') {
        match segment {
            "" => return bad("has an empty segment"),
            "." | ".." => return bad("has a '.' or '..' segment"),
            _ => {}
        }
    }
    Ok(())
}

/// Splits a valid non-root path into its parent path and last segment.
pub(crate) fn parent_and_name(path: &str) -> (&str, &str) {
    let slash = path.rfind('/').expect("valid paths are absolute");
    let parent = if slash == 0 { "/" } else { &path[..slash] };
    (parent, &path[slash + 1..])
}

/// Joins a parent path and a child name.
pub(crate) fn join(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_and_rejects() {
        for ok in ["/", "/a", "/a/b", "/a-b/c.d", "/..a"] {
            assert!(validate_path(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a", "/a/", "//a", "/a//b", "/a/./b", "/a/..", "/a\0"] {
            assert!(
                matches!(validate_path(bad), Err(Error::BadArguments(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn splits() {
        assert_eq!(parent_and_name("/a"), ("/", "a"));
        assert_eq!(parent_and_name("/a/b/c"), ("/a/b", "c"));
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
    }
}
