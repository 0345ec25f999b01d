//! The audit log file, rotated as kube-apiserver's (gopkg.in/natefinch/lumberjack.v2):
//! when a write would take the file past `--audit-log-maxsize` megabytes
//! (0: 100), it is renamed to `<name>-<UTC time>.<ext>` (time as
//! `2006-01-02T15-04-05.000`) and a new file started; then, off the writing
//! thread, backups beyond `--audit-log-maxbackup` (0: all kept) and older than
//! `--audit-log-maxage` days (0: no limit) are removed, and with
//! `--audit-log-compress` the others are gzipped (`.gz`, the original removed).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use chrono::{DateTime, NaiveDateTime, Utc};

const MEGABYTE: u64 = 1024 * 1024;
/// lumberjack's size when none is given.
const DEFAULT_MAX_SIZE_MB: u64 = 100;
const BACKUP_TIME_FORMAT: &str = "%Y-%m-%dT%H-%M-%S%.3f";

#[derive(Debug, Clone, Copy, Default)]
pub struct Rotation {
    pub max_size_mb: u64,
    pub max_age_days: u64,
    pub max_backups: usize,
    pub compress: bool,
}

pub struct RotatingFile {
    path: PathBuf,
    rotation: Rotation,
    file: Option<File>,
    size: u64,
    /// One cleanup at a time.
    mill: Arc<Mutex<()>>,
}

impl RotatingFile {
    /// Opens (creating it and its directory, mode 0600) the log at `path`, as kube does at start.
    pub fn open(path: &Path, rotation: Rotation) -> io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)?;
        }
        let file = open_append(path)?;
        let size = file.metadata()?.len();
        Ok(Self { path: path.to_path_buf(), rotation, file: Some(file), size, mill: Arc::default() })
    }

    fn max_size(&self) -> u64 {
        let mb = if self.rotation.max_size_mb == 0 { DEFAULT_MAX_SIZE_MB } else { self.rotation.max_size_mb };
        mb * MEGABYTE
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.file = None;
        let backup = backup_name(&self.path, Utc::now());
        if self.path.exists() {
            fs::rename(&self.path, &backup)?;
        }
        self.file = Some(open_append(&self.path)?);
        self.size = 0;
        let (path, rotation, mill) = (self.path.clone(), self.rotation, self.mill.clone());
        std::thread::spawn(move || {
            let _turn = mill.lock();
            if let Err(e) = clean_up(&path, rotation, SystemTime::now()) {
                tracing::warn!(error = %e, path = %path.display(), "cleaning up rotated audit logs");
            }
        });
        Ok(())
    }
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let len = buf.len() as u64;
        let max = self.max_size();
        if len > max {
            return Err(io::Error::other(format!("write length {len} exceeds maximum file size {max}")));
        }
        if self.size + len > max || self.file.is_none() {
            self.rotate()?;
        }
        let file = self.file.as_mut().ok_or_else(|| io::Error::other("audit log file not open"))?;
        let n = file.write(buf)?;
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.as_mut().map_or(Ok(()), |f| f.flush())
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// `<dir>/<stem>-<time>.<ext>`.
fn backup_name(path: &Path, at: DateTime<Utc>) -> PathBuf {
    let (stem, ext) = split_name(path);
    path.with_file_name(format!("{stem}-{}{ext}", at.format(BACKUP_TIME_FORMAT)))
}

/// The file name's stem and its extension with the dot (`audit`, `.log`).
fn split_name(path: &Path) -> (String, String) {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match name.rfind('.') {
        Some(i) if i > 0 => (name[..i].to_string(), name[i..].to_string()),
        _ => (name, String::new()),
    }
}

/// The backups of `path`, newest first: (time, file, compressed).
fn backups(path: &Path) -> io::Result<Vec<(NaiveDateTime, PathBuf, bool)>> {
    let (stem, ext) = split_name(path);
    let prefix = format!("{stem}-");
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(&prefix) else { continue };
        let (rest, compressed) = match rest.strip_suffix(".gz") {
            Some(r) => (r, true),
            None => (rest, false),
        };
        let Some(time) = rest.strip_suffix(ext.as_str()) else { continue };
        if let Ok(t) = NaiveDateTime::parse_from_str(time, BACKUP_TIME_FORMAT) {
            found.push((t, entry.path(), compressed));
        }
    }
    found.sort_by_key(|b| std::cmp::Reverse(b.0));
    Ok(found)
}

/// lumberjack's `millRunOnce`: removes the backups beyond the count and age
/// limits, then compresses the rest when asked to.
fn clean_up(path: &Path, rotation: Rotation, now: SystemTime) -> io::Result<()> {
    let mut files = backups(path)?;
    let mut remove = Vec::new();
    if rotation.max_backups > 0 {
        // A backup and its compressed copy (mid-compression) count as one.
        let mut kept_times = Vec::new();
        files.retain(|(t, p, _)| {
            if kept_times.contains(t) || kept_times.len() < rotation.max_backups {
                if !kept_times.contains(t) {
                    kept_times.push(*t);
                }
                true
            } else {
                remove.push(p.clone());
                false
            }
        });
    }
    if rotation.max_age_days > 0 {
        let cutoff: DateTime<Utc> = (now - Duration::from_secs(rotation.max_age_days * 24 * 3600)).into();
        files.retain(|(t, p, _)| {
            let keep = t.and_utc() >= cutoff;
            if !keep {
                remove.push(p.clone());
            }
            keep
        });
    }
    for p in remove {
        fs::remove_file(&p)?;
    }
    if rotation.compress {
        for (_, p, compressed) in files {
            if !compressed {
                compress(&p)?;
            }
        }
    }
    Ok(())
}

fn compress(path: &Path) -> io::Result<()> {
    let mut gz_name = path.as_os_str().to_owned();
    gz_name.push(".gz");
    let gz_path = PathBuf::from(gz_name);
    let mut input = File::open(path)?;
    let output = open_append(&gz_path)?;
    let mut encoder = flate2::write::GzEncoder::new(output, flate2::Compression::default());
    io::copy(&mut input, &mut encoder)?;
    encoder.finish()?.sync_all()?;
    fs::remove_file(path)
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    #[test]
    fn a_full_file_rolls_and_the_backups_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/audit.log");
        let rotation = Rotation { max_size_mb: 1, max_backups: 2, ..Default::default() };
        let mut f = RotatingFile::open(&path, rotation).unwrap();
        let line = vec![b'x'; 300 * 1024];
        for _ in 0..15 {
            f.write_all(&line).unwrap();
            // Distinct backup names (millisecond resolution).
            std::thread::sleep(Duration::from_millis(3));
        }
        // 15 × 300 KiB in 1 MiB files of 3 lines: 4 rotations, 2 backups kept.
        wait_for("two backups", || names(path.parent().unwrap()).len() == 3);
        let files = names(path.parent().unwrap());
        assert!(files.contains(&"audit.log".to_string()), "{files:?}");
        for backup in files.iter().filter(|n| *n != "audit.log") {
            assert!(backup.starts_with("audit-") && backup.ends_with(".log"), "{backup}");
            assert_eq!(fs::metadata(path.parent().unwrap().join(backup)).unwrap().len(), 3 * 300 * 1024);
        }
        assert_eq!(fs::metadata(&path).unwrap().len(), 3 * 300 * 1024);
        assert!(f.write_all(&vec![b'y'; 2 * 1024 * 1024]).is_err(), "a line larger than a file is refused");
        #[cfg(unix)]
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&fs::metadata(&path).unwrap().permissions()) & 0o777, 0o600);
    }

    #[test]
    fn rotated_files_are_compressed_and_old_ones_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit");
        // Backups from long ago: older than max age.
        let old = Utc::now() - chrono::Duration::days(10);
        fs::write(backup_name(&path, old), b"old").unwrap();
        fs::write(format!("{}.gz", backup_name(&path, old - chrono::Duration::days(1)).display()), b"older").unwrap();
        fs::write(dir.path().join("unrelated.txt"), b"keep").unwrap();
        let rotation = Rotation { max_size_mb: 1, max_age_days: 3, compress: true, ..Default::default() };
        let mut f = RotatingFile::open(&path, rotation).unwrap();
        f.write_all(&vec![b'a'; 700 * 1024]).unwrap();
        f.write_all(&vec![b'b'; 700 * 1024]).unwrap();
        wait_for("one compressed backup", || {
            let n = names(dir.path());
            n.len() == 3 && n.iter().any(|n| n.ends_with(".gz"))
        });
        let files = names(dir.path());
        let gz = files.iter().find(|n| n.ends_with(".gz")).unwrap();
        assert!(gz.starts_with("audit-"), "{files:?}");
        let mut text = Vec::new();
        flate2::read::GzDecoder::new(File::open(dir.path().join(gz)).unwrap()).read_to_end(&mut text).unwrap();
        assert_eq!(text, vec![b'a'; 700 * 1024]);
        assert!(files.contains(&"unrelated.txt".to_string()));
    }
}
