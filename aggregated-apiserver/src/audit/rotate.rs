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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
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
    /// The file being appended to. Writers share it: the file is opened
    /// `O_APPEND`, so the kernel appends each `write` whole and lines from
    /// two threads never interleave; only a rotation takes it alone. A lock
    /// held around the system call would make the other worker thread sleep
    /// on it and be woken for every event it wrote while one was being
    /// written (a context switch, and cold caches, a request).
    current: RwLock<Current>,
    /// One cleanup at a time.
    mill: Arc<Mutex<()>>,
}

struct Current {
    file: Option<File>,
    /// Bytes in the file, and those being written to it.
    size: AtomicU64,
}

impl RotatingFile {
    /// Opens (creating it and its directory, mode 0600) the log at `path`, as kube does at start.
    pub fn open(path: &Path, rotation: Rotation) -> io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)?;
        }
        let file = open_append(path)?;
        let size = AtomicU64::new(file.metadata()?.len());
        Ok(Self {
            path: path.to_path_buf(),
            rotation,
            current: RwLock::new(Current { file: Some(file), size }),
            mill: Arc::default(),
        })
    }

    fn max_size(&self) -> u64 {
        let mb = if self.rotation.max_size_mb == 0 { DEFAULT_MAX_SIZE_MB } else { self.rotation.max_size_mb };
        mb * MEGABYTE
    }

    /// Appends `buf` with one `write`, first rolling the file over when `buf`
    /// would take it past the size limit (lumberjack's rule).
    pub fn append(&self, buf: &[u8]) -> io::Result<()> {
        let len = buf.len() as u64;
        let max = self.max_size();
        if len > max {
            return Err(io::Error::other(format!("write length {len} exceeds maximum file size {max}")));
        }
        {
            let current = self.current.read().unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some(file) = &current.file {
                // The bytes are counted before they are written, so two
                // writers can't both take the file past the limit.
                if current.size.fetch_add(len, Ordering::Relaxed) + len <= max {
                    return write_whole(file, buf);
                }
                current.size.fetch_sub(len, Ordering::Relaxed);
            }
        }
        let mut current = self.current.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Another writer may have rolled it over meanwhile.
        if current.file.is_none() || current.size.load(Ordering::Relaxed) + len > max {
            self.rotate(&mut current)?;
        }
        current.size.fetch_add(len, Ordering::Relaxed);
        let file = current.file.as_ref().ok_or_else(|| io::Error::other("audit log file not open"))?;
        write_whole(file, buf)
    }

    fn rotate(&self, current: &mut Current) -> io::Result<()> {
        current.file = None;
        let backup = free_backup_name(&self.path, Utc::now());
        if self.path.exists() {
            fs::rename(&self.path, &backup)?;
        }
        current.file = Some(open_append(&self.path)?);
        current.size = AtomicU64::new(0);
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

/// `buf` in one `write` (a regular file takes it whole but on an error such
/// as a full disk, which is then the answer).
fn write_whole(mut file: &File, buf: &[u8]) -> io::Result<()> {
    file.write_all(buf)
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

/// The backup name for a rotation at `at`, or at the first millisecond
/// after it that no earlier backup has taken (plain or compressed): two
/// rotations within one millisecond (a small `--audit-log-maxsize` under
/// load) would otherwise rename onto one name, and the first backup would
/// be lost. lumberjack has that limit; this keeps every file, and the
/// names still sort as the rotations happened.
fn free_backup_name(path: &Path, mut at: DateTime<Utc>) -> PathBuf {
    loop {
        let backup = backup_name(path, at);
        let mut compressed = backup.as_os_str().to_owned();
        compressed.push(".gz");
        if !backup.exists() && !Path::new(&compressed).exists() {
            return backup;
        }
        at += chrono::TimeDelta::milliseconds(1);
    }
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
        let f = RotatingFile::open(&path, rotation).unwrap();
        let line = vec![b'x'; 300 * 1024];
        for _ in 0..15 {
            f.append(&line).unwrap();
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
        assert!(f.append(&vec![b'y'; 2 * 1024 * 1024]).is_err(), "a line larger than a file is refused");
        #[cfg(unix)]
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&fs::metadata(&path).unwrap().permissions()) & 0o777, 0o600);
    }

    #[test]
    fn rotations_within_one_millisecond_keep_every_backup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let f = RotatingFile::open(&path, Rotation { max_size_mb: 1, ..Default::default() }).unwrap();
        let line = vec![b'x'; 600 * 1024];
        // Every append but the first rolls the file over, with no pause
        // between them: several rotations fall in each millisecond.
        for _ in 0..20 {
            f.append(&line).unwrap();
        }
        let files = names(dir.path());
        assert_eq!(files.len(), 20, "19 backups and the current file: {files:?}");
        let mut times: Vec<NaiveDateTime> = backups(&path).unwrap().into_iter().map(|(t, _, _)| t).collect();
        times.dedup();
        assert_eq!(times.len(), 19, "each backup its own time: {files:?}");
        for name in files {
            assert_eq!(fs::metadata(dir.path().join(&name)).unwrap().len(), 600 * 1024, "{name}");
        }
    }

    /// Threads appending at once (no lock of ours around the writes) leave
    /// every line whole, none lost, and no file past its size.
    #[test]
    fn concurrent_appends_keep_lines_whole_across_rotations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let f = Arc::new(RotatingFile::open(&path, Rotation { max_size_mb: 1, ..Default::default() }).unwrap());
        let (threads, lines) = (4, 1500);
        let writers: Vec<_> = (0..threads)
            .map(|t| {
                let f = f.clone();
                std::thread::spawn(move || {
                    for i in 0..lines {
                        let mut line = format!("{t}:{i}:").into_bytes();
                        line.resize(999, b'a' + t as u8);
                        line.push(b'\n');
                        f.append(&line).unwrap();
                    }
                })
            })
            .collect();
        writers.into_iter().for_each(|w| w.join().unwrap());
        let mut seen = 0;
        for name in names(dir.path()) {
            let bytes = fs::read(dir.path().join(&name)).unwrap();
            assert!(bytes.len() as u64 <= MEGABYTE, "{name}: {} bytes", bytes.len());
            for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                let fill = line.last().copied().unwrap();
                assert!(
                    line.len() == 999 && line[line.len() - 900..].iter().all(|b| *b == fill),
                    "{name}: a torn line"
                );
                seen += 1;
            }
        }
        assert_eq!(seen, threads * lines);
        assert!(names(dir.path()).len() >= 6, "{:?}", names(dir.path()));
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
        let f = RotatingFile::open(&path, rotation).unwrap();
        f.append(&vec![b'a'; 700 * 1024]).unwrap();
        f.append(&vec![b'b'; 700 * 1024]).unwrap();
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
