/* tma_marker.h: mark named regions of a program for `tma stat --regions`.
 *
 * Link with -ltma_marker (libtma_marker.so or libtma_marker.a, built by
 * `cargo build -p tma-marker --release`). Every call is a no-op when the program does not
 * run under tma; all calls are thread-safe. Regions nest per thread, and an end names the
 * innermost open region of its thread. Names: 1 to 200 bytes of UTF-8 without tabs or
 * control characters.
 *
 *   tma_region_begin("solve");
 *   solve();
 *   tma_region_end("solve");
 *
 * Run with: tma stat --regions -- ./program
 */
#ifndef TMA_MARKER_H
#define TMA_MARKER_H

#ifdef __cplusplus
extern "C" {
#endif

/* Enter region `name` on the calling thread. */
void tma_region_begin(const char *name);
/* Leave region `name`, the innermost open region of the calling thread. */
void tma_region_end(const char *name);
/* Send the calling thread's totals to tma now (they are also sent when the thread exits). */
void tma_region_flush(void);
/* 1 when the program runs under tma (regions are recorded), else 0. */
int tma_regions_active(void);
/* Stop recording regions in every thread (regions begun meanwhile are not recorded)... */
void tma_regions_pause(void);
/* ...until this. */
void tma_regions_resume(void);

#ifdef __cplusplus
}
#endif

#endif /* TMA_MARKER_H */
