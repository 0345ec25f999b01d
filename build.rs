//! The source revision the binary is built from, for `--version`, `/version`
//! and the image's labels:
//!
//! 1. `FARM_SOURCE_REVISION` from the environment, as given, when set: an
//!    image build passes the revision its OCI label carries (`scripts/image`
//!    on the host, the Dockerfile's build stage without `.git`), so the label
//!    and the binary agree;
//! 2. else `git rev-parse --short=7 HEAD` and that commit's date, when the
//!    source is a git checkout and git is installed;
//! 3. else `unknown`.
//!
//! It sets `FARM_SOURCE_REVISION_RESOLVED` (the revision alone) and
//! `FARM_VERSION_DETAIL` (`(rev 92fa3f0, 2026-11-26)`; no date when the
//! revision was given). It runs again only when the variable changes or HEAD
//! or the branch it points at moves, so builds stay incremental: a few git
//! calls, no tree status.
//!
//! It also links the binary with packed relative relocations
//! ([`pack_relative_relocs`]).

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

/// The files whose change means another commit is checked out: HEAD (in a
/// worktree's own git dir), the branch's ref and packed-refs (in the common dir).
fn head_files(dir: &Path) -> Vec<PathBuf> {
    let absolute = |p: String| if Path::new(&p).is_absolute() { PathBuf::from(p) } else { dir.join(p) };
    let mut files = Vec::new();
    if let Some(git_dir) = git(dir, &["rev-parse", "--git-dir"]).map(absolute) {
        files.push(git_dir.join("HEAD"));
    }
    if let Some(common) = git(dir, &["rev-parse", "--git-common-dir"]).map(absolute) {
        if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
            files.push(common.join(branch));
        }
        files.push(common.join("packed-refs"));
    }
    // A path that does not exist would make cargo run this script on every build.
    files.retain(|f| f.exists());
    files
}

/// Links the binary with `-z pack-relative-relocs` (DT_RELR) when the target
/// is Linux with glibc 2.36 or later, the first to apply such relocations.
///
/// A position-independent executable holds ~53,000 relative relocations (a
/// pointer in a vtable, a `&str` in a static table each): as RELA entries of
/// 24 bytes, 1.3 MB that the dynamic loader reads at every start, and so
/// 1.3 MB of the binary resident in every process, idle or not. Packed, they
/// take a few kilobytes; the relocated data, its protection (RELRO) and the
/// executable's address randomisation stay as they were. glibc is the host's
/// when the target is the host (it is in every build of ours, the image's
/// static one included); a cross build, or an older or unknown glibc, links
/// as before, because a loader older than 2.36 refuses such a binary.
fn pack_relative_relocs() {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" || var("TARGET") != var("HOST") {
        return;
    }
    let glibc = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| {
            let (major, minor) = text.trim().strip_prefix("glibc ")?.split_once('.')?;
            let minor = minor.split('.').next()?;
            Some((major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?))
        });
    if glibc.is_some_and(|version| version >= (2, 36)) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    pack_relative_relocs();
    println!("cargo:rerun-if-env-changed=FARM_SOURCE_REVISION");
    let given = std::env::var("FARM_SOURCE_REVISION").ok().map(|r| r.trim().to_string()).filter(|r| !r.is_empty());
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let (revision, date) = match given {
        Some(revision) => (revision, None),
        None => match git(&dir, &["rev-parse", "--short=7", "HEAD"]) {
            Some(revision) => {
                for file in head_files(&dir) {
                    println!("cargo:rerun-if-changed={}", file.display());
                }
                (revision, git(&dir, &["show", "-s", "--format=%cs", "HEAD"]))
            }
            None => ("unknown".to_string(), None),
        },
    };
    let detail = match date {
        Some(date) => format!("(rev {revision}, {date})"),
        None => format!("(rev {revision})"),
    };
    println!("cargo:rustc-env=FARM_SOURCE_REVISION_RESOLVED={revision}");
    println!("cargo:rustc-env=FARM_VERSION_DETAIL={detail}");
}
