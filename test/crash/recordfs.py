#!/usr/bin/python3
# A FUSE filesystem that passes every call through to a backing directory and records
# each call that changes what a power cut could leave on disk, in the order it was
# served (one thread: the order is total): names made, linked, renamed and removed,
# bytes written, sizes set, and fsyncs of files and directories. Writes to /.mark at
# the mount's root are not stored: each is recorded as a mark, so that the workload
# can say what it began and what resolved between the filesystem's calls.
#
# usage: recordfs.py BACKING MOUNTPOINT LOGDIR
# LOGDIR gets ops.jsonl (one call per line) and data.bin (the bytes written). Files
# and directories are named by ids of their own (inode numbers are reused): the ids
# of what BACKING holds at start are recorded first as "have" entries.

import errno
import json
import os
import sys

import fusepy
from fusepy import FUSE, FuseOSError, Operations

MARK = '/.mark'
HIDDEN = '.fuse_hidden'  # libfuse renames a file removed while open to this


class RecordFs(Operations):
    def __init__(self, backing, logdir):
        self.root = os.path.realpath(backing)
        self.ops = open(os.path.join(logdir, 'ops.jsonl'), 'w')
        self.data = open(os.path.join(logdir, 'data.bin'), 'wb')
        self.data_at = 0
        self.next_id = 1
        self.ids = {}  # path -> id of what it names now
        self.fds = {}  # fd -> id of the file it is open on
        self.mark_fds = set()
        self.ids['/'] = self.new_id()
        by_inode = {}  # hard links share an id
        for top, dirs, files in os.walk(self.root):
            rel = '/' if top == self.root else '/' + os.path.relpath(top, self.root)
            for name in sorted(dirs) + sorted(files):
                path = os.path.join(rel, name)
                if path == MARK:
                    continue
                st = os.lstat(self.real(path))
                kind = 'd' if name in dirs else 'f'
                key = (st.st_dev, st.st_ino)
                id_ = by_inode.get(key) if kind == 'f' else None
                if id_ is None:
                    id_ = self.new_id()
                    by_inode[key] = id_
                self.ids[path] = id_
                self.log(o='have', p=path, i=id_, t=kind)

    def new_id(self):
        self.next_id += 1
        return self.next_id - 1

    def real(self, path):
        return self.root + path

    def log(self, **entry):
        self.ops.write(json.dumps(entry, separators=(',', ':')) + '\n')

    def destroy(self, path):
        self.ops.close()
        self.data.close()

    def hidden(self, path):
        return os.path.basename(path).startswith(HIDDEN)

    # Names

    def create(self, path, mode, fi=None):
        existed = os.path.lexists(self.real(path))
        fd = os.open(self.real(path), os.O_WRONLY | os.O_CREAT, mode)
        if path == MARK:
            self.mark_fds.add(fd)
            return fd
        if not existed:
            self.ids[path] = self.new_id()
            self.log(o='create', p=path, i=self.ids[path], t='f')
        self.fds[fd] = self.ids[path]
        return fd

    def mkdir(self, path, mode):
        os.mkdir(self.real(path), mode)
        self.ids[path] = self.new_id()
        self.log(o='create', p=path, i=self.ids[path], t='d')

    def link(self, target, source):
        os.link(self.real(source), self.real(target))
        self.ids[target] = self.ids[source]
        self.log(o='link', p=target, i=self.ids[source])

    def rename(self, old, new):
        os.rename(self.real(old), self.real(new))
        if self.hidden(new):
            # Not a name anyone gave: the file was removed while open, or is being
            # replaced by a rename (which comes next, and which no cut may split from this).
            self.log(o='unlink', p=old, hidden=True)
        else:
            self.log(o='rename', a=old, b=new)
        prefix = old + '/'
        for path in [p for p in self.ids if p == old or p.startswith(prefix)]:
            self.ids[new + path[len(old):]] = self.ids.pop(path)
        # A directory renamed over an empty one, or a file over a file: the old target
        # is gone, and its id with it.

    def unlink(self, path):
        os.unlink(self.real(path))
        if path == MARK:
            return
        self.ids.pop(path, None)
        if not self.hidden(path):
            self.log(o='unlink', p=path)

    def rmdir(self, path):
        os.rmdir(self.real(path))
        self.ids.pop(path, None)
        self.log(o='rmdir', p=path)

    def symlink(self, target, source):
        raise FuseOSError(errno.EPERM)  # nothing kfs or LevelDB does

    # Contents

    def open(self, path, flags):
        id_ = self.ids.get(path)
        fd = os.open(self.real(path), flags & ~os.O_CREAT)
        if path == MARK:
            self.mark_fds.add(fd)
        elif id_ is not None:
            self.fds[fd] = id_
            if flags & os.O_TRUNC:
                self.log(o='trunc', i=id_, n=0)
        return fd

    def write(self, path, data, offset, fh):
        if fh in self.mark_fds:
            for line in data.decode().splitlines():
                self.log(o='mark', t=line)
            return len(data)
        id_ = self.fds[fh]  # before the write: a call that fails has done nothing
        n = os.pwrite(fh, data, offset)
        self.data.write(data[:n])
        self.log(o='w', i=id_, off=offset, n=n, d=self.data_at)
        self.data_at += n
        return n

    def truncate(self, path, length, fh=None):
        if fh is not None and fh in self.fds:
            os.ftruncate(fh, length)
            id_ = self.fds[fh]
        else:
            os.truncate(self.real(path), length)
            id_ = self.ids.get(path)
        if id_ is not None and path != MARK:
            self.log(o='trunc', i=id_, n=length)

    def fsync(self, path, datasync, fh):
        if fh in self.mark_fds:
            return 0
        id_ = self.fds[fh]
        if datasync:
            os.fdatasync(fh)
        else:
            os.fsync(fh)
        self.log(o='fsync', i=id_)
        return 0

    def fsyncdir(self, path, datasync, fh):
        fd = os.open(self.real(path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.log(o='fsyncdir', p=path)
        return 0

    def release(self, path, fh):
        self.fds.pop(fh, None)
        self.mark_fds.discard(fh)
        os.close(fh)
        return 0

    def flush(self, path, fh):
        return 0

    # Passed through, not recorded

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def getattr(self, path, fh=None):
        st = os.lstat(self.real(path))
        return {key: getattr(st, key) for key in ('st_atime', 'st_ctime', 'st_gid', 'st_mode', 'st_mtime', 'st_nlink', 'st_size', 'st_uid', 'st_blocks')}

    def readdir(self, path, fh):
        return ['.', '..'] + os.listdir(self.real(path))

    def access(self, path, mode):
        if not os.access(self.real(path), mode):
            raise FuseOSError(errno.EACCES)

    def chmod(self, path, mode):
        os.chmod(self.real(path), mode)

    def chown(self, path, uid, gid):
        os.chown(self.real(path), uid, gid)

    def utimens(self, path, times=None):
        os.utime(self.real(path), times)

    def statfs(self, path):
        st = os.statvfs(self.real(path))
        return {key: getattr(st, key) for key in ('f_bavail', 'f_bfree', 'f_blocks', 'f_bsize', 'f_favail', 'f_ffree', 'f_files', 'f_flag', 'f_frsize', 'f_namemax')}

    def readlink(self, path):
        return os.readlink(self.real(path))


def main():
    backing, mountpoint, logdir = sys.argv[1:4]
    fs = RecordFs(backing, logdir)
    # Every error a call raises reaches the caller as its errno (fusepy does so for
    # OSError), and the order of calls is the order they were served.
    FUSE(fs, mountpoint, foreground=True, nothreads=True, big_writes=True, max_write=131072, fsname='kfs-recordfs')


if __name__ == '__main__':
    main()
