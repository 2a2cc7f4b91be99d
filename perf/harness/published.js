'use strict'

// Figures published for other storage systems, measured on other hardware, quoted
// beside ours in the fio report, each with the source it is cited from; the charts draw
// them in grey, saying so. Never compare them with ours as ratios. LeoFS's listing times
// are not quoted: no source for them can be cited.

module.exports = {
  cubefs: {
    text: 'CubeFS, FUSE client, fio `--bs=1M --ioengine=libaio`, 1 job x 10G or 32 jobs x 1G, in fio\'s decimal MB/s ' +
      '(docs/source/evaluation/kernelclient.md at cubefs/cubefs b9b6c1b, PR #3561; client: Xeon Gold 6230, 80 cores, 256 GB, ' +
      'bonded 1 Gb/s links): page I/O sequential write 120 MB/s with 1 file, 1,379 MB/s with 32; sequential read 638 MB/s with 1 file, ' +
      '1,851 MB/s with 32 (direct I/O: write 120 and 1,387, read 257 and 2,344).'
  },
  gcsfuse: {
    text: 'GCSFuse, fio with 40 threads, 1 MB blocks, 60 s per cell, reading from a Cloud Storage bucket on an n2-standard-48 VM ' +
      '(docs/benchmarks.md at GoogleCloudPlatform/gcsfuse 81b1992, 2022), sequential / random GiB/s by file size: ' +
      '256 KB 0.47 / 0.45, 1 MB 1.56 / 1.46, 2 MB 2.27 / 2.00, 5 MB 3.75 / 1.64, 10 MB 4.02 / 1.44, 50 MB 4.37 / 1.31, ' +
      '100 MB 4.33 / 1.07, 200 MB 4.31 / 1.06, 1 GB 4.32 / 0.91 (average latency 580.67 ms sequential, 2,809 ms random at 1 GB).',
    // GiB/s by file size as labelled there (256 KB ... 1 GB), matched to our 256 KiB ... 1 GiB.
    bySize: {
      'seq-read': { 256: 0.47, 1024: 1.56, 2048: 2.27, 5120: 3.75, 10240: 4.02, 51200: 4.37, 102400: 4.33, 204800: 4.31, 1048576: 4.32 },
      'rand-read': { 256: 0.45, 1024: 1.46, 2048: 2.00, 5120: 1.64, 10240: 1.44, 51200: 1.31, 102400: 1.07, 204800: 1.06, 1048576: 0.91 }
    }
  }
}
