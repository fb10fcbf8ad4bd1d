/* main.c - the `bench` program: what every OpenCL device, and all of them
 * together, deliver through nncl: GEMM, memory bandwidth, launch cost,
 * program builds, training throughput and its scaling, with driver
 * telemetry; each beside the host CPU and the raw OpenCL/CLBlast baseline.
 * Tables go to stdout, the progress line to stderr; --json, --csv and --svg
 * write the results to files. */
#include "train.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A section that steps the progress line once per device itself. */
static int main_per_device(const bench_opts *o, int n_devices) {
    (void)o;
    return n_devices;
}

const bench_section bench_sections[] = {
    {"devices", "devices", NULL, NULL, NULL},
    {"gemm", "SGEMM: nncl_gemm vs raw CLBlastSgemm, beside the host CPU", bench_gemm, bench_gemm_steps, NULL},
    {"bandwidth", "memory bandwidth", bench_bandwidth, NULL, NULL},
    {"launch", "kernel launch: nncl_add vs raw clEnqueueNDRangeKernel", bench_launch, NULL, NULL},
    {"build", "program build: cold (empty driver cache, child process) and warm", bench_build, main_per_device, NULL},
    {"training", "training (Adam: MLP, CNN, LSTM, MobileNet batch 100, VGG, ResNet 64; GPTs AdamW): alone, together",
     bench_training, bench_training_steps, NULL},
    {"kernels", "kernels of one training step, per device alone (profiling events)", NULL, NULL, "training"},
    {"checkpoint", "gradient checkpointing: peak memory, samples/s, largest batch under a 256 MiB cap",
     bench_checkpoint, bench_checkpoint_steps, NULL},
    {"pipeline", "pipeline parallelism: a deep MLP (784-6x1024-10, batch 256) over 2 and 3 devices, 8 micro-batches", bench_pipeline, NULL, NULL},
    {"membound", "memory-bound kernels of batch-norm, rows (layer norm, softmax) and depthwise steps: GB/s vs copy",
     bench_membound, main_per_device, NULL},
    {"monitor", "monitor: profiling busy time, nncl memory, driver telemetry", NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static void main_usage(FILE *f) {
    fputs("usage: bench [options]\n"
          "  --devices SEL   devices to measure, as NNCL_DEVICES: \"all\", \"gpu\", \"cpu\", \"0,2\", \"portable\",\n"
          "                  \"rusticl:1\" ... (default: $NNCL_DEVICES, else all)\n"
          "  --sizes LIST    square GEMM sizes, comma-separated (default 128,256,512,1024,2048;\n"
          "                  quick: 64,128); the MLP and CNN shapes are always measured\n"
          "  --repeats N     timed repeats per figure; the median and min-max are reported\n"
          "                  (default 5, quick 3)\n"
          "  --seconds S     least duration of one timed repeat (default 0.2, quick 0.03);\n"
          "                  a training repeat lasts 5x (quick 2x) this\n"
          "  --batch N       global batch of the training section (default 100); the pipeline\n"
          "                  section's model is its own: 784, six hidden layers of 1024, 10, at\n"
          "                  batch 256 (8 micro-batches of 32 rows; quick: width 128 at this batch)\n"
          "  --quick         small sizes, synthetic data, short runs (what the tests run); each GEMM\n"
          "                  kernel timed where a call takes under 0.2 s, fp16 and bf16 trained\n"
          "                  where an fp32 step takes under 1 s\n"
          "  --no-train      leave out the training section (and its per-kernel breakdown: which\n"
          "                  kernels take a profiled MLP and CNN step's time, ms per step and share)\n"
          "  --only LIST     run only these sections, comma-separated: those --list names with a\n"
          "                  measurement of their own (devices and monitor are always there)\n"
          "  --models LIST   models the training section trains, comma-separated: mlp, cnn, lstm,\n"
          "                  vgg, resnet (CIFAR-shaped, batch 64), mobilenet (examples/\n"
          "                  fashion_mnist_mobilenet's at half its pointwise widths, batch 100),\n"
          "                  gpt (examples/char_gpt's: 4 layers, 128 channels, context 64, batch\n"
          "                  12), gpt_large (6 layers, 384, context 256, batch 64); default all of\n"
          "                  them, with --quick all but vgg, resnet, mobilenet and gpt_large\n"
          "  --first-step M  only the first training step of model M (as --models names it) in this\n"
          "                  process: the trainer's creation, steps 1 and 2, and what they waited\n"
          "                  for (program builds, GEMM and convolution choices); run with empty\n"
          "                  NNCL_CACHE_DIR and POCL_CACHE_DIR for the cold figure, again for the warm\n"
          "  --list          the sections, one a line: name, a tab, the title of its table\n"
          "  --data DIR      Fashion-MNIST folder (default /usr/share/datasets/fashion-mnist;\n"
          "                  synthetic data of the same shapes when absent or with --quick)\n"
          "  --json FILE     all results as JSON     --csv FILE   as CSV\n"
          "  --svg FILE      bar chart of training samples/s per device and all together\n"
          "  --help          this text\n"
          "On CPU devices (PoCL) set OMP_WAIT_POLICY=passive: spinning OpenMP threads of the trainer\n"
          "otherwise take the cores the devices compute on (see bench/RESULTS.md).\n"
          "Every figure is the median of the repeats after a warm-up; +-% in the tables is half the\n"
          "min-max range relative to the median. n/a marks a figure that could not be had, and why.\n",
          f);
}

static int main_sizes(const char *s, bench_opts *o) {
    o->n_sizes = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 16384 || o->n_sizes == 16) return 1;
        o->sizes[o->n_sizes++] = (int)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return 1;
    }
    return o->n_sizes == 0;
}

static void main_devices(nncl_context *ctx) {
    int d, nd = nncl_device_count(ctx);
    printf("\n== %s (%d in the context)\n", bench_sections[0].title, nd); /* the table's first row */
    for (d = 0; d < nd; d++) {
        char peak[96], gm[32], line[1024];
        double p = bench_get("devices", d, "info", "peak_gflops");
        const bench_rec *r;
        const char *name = "", *plat = "", *vendor = "", *driver = "", *method = "", *pci = "";
        int i;
        for (i = 0; i < bench_rec_count(); i++) {
            r = bench_rec_at(i);
            if (strcmp(r->section, "devices") || r->device != d) continue;
            if (!strcmp(r->key, "name")) name = r->text;
            else if (!strcmp(r->key, "platform")) plat = r->text;
            else if (!strcmp(r->key, "vendor")) vendor = r->text;
            else if (!strcmp(r->key, "driver")) driver = r->text;
            else if (!strcmp(r->key, "pci")) pci = r->text;
            else if (!strcmp(r->key, "peak_gflops")) method = r->note;
        }
        if (bench_isnan(p)) snprintf(peak, sizeof peak, "n/a");
        else snprintf(peak, sizeof peak, "%.0f GFLOP/s", p);
        snprintf(gm, sizeof gm, "%.0f MiB", bench_get("devices", d, "info", "global_mem_mib"));
        snprintf(line, sizeof line, "d%d  %s", d, name);
        bench_line(stdout, line);
        snprintf(line, sizeof line, "    platform %s | vendor %s | driver %s | %s", plat, vendor, driver,
                 pci[0] ? pci : "no PCI address");
        bench_line(stdout, line);
        printf("    %.0f compute units @ %.0f MHz | %s | fp16 %s | fp64 %s\n", bench_get("devices", d, "info", "compute_units"),
               bench_get("devices", d, "info", "clock_mhz"), gm,
               bench_get("devices", d, "info", "fp16") > 0 ? "yes" : "no",
               bench_get("devices", d, "info", "fp64") > 0 ? "yes" : "no");
        snprintf(line, sizeof line, "    theoretical peak %s (%s)", peak, strncmp(method, "n/a: ", 5) ? method : method + 5);
        bench_line(stdout, line);
    }
}

void bench_devices(const bench_opts *o, nncl_context *ctx) {
    int d, nd = nncl_device_count(ctx);
    (void)o;
    for (d = 0; d < nd; d++) {
        nncl_device_info info;
        char method[200];
        double peak;
        static const char *const types[] = {"?", "CPU", "GPU", "?", "accelerator", "?", "?", "?", "other"};
        if (nncl_device_info_get(ctx, d, &info) != NNCL_OK) continue;
        bench_put_text("devices", d, "info", "name", info.name);
        bench_put_text("devices", d, "info", "platform", info.platform);
        bench_put_text("devices", d, "info", "vendor", info.vendor);
        bench_put_text("devices", d, "info", "driver", info.driver);
        bench_put_text("devices", d, "info", "cl_version", info.cl_version);
        bench_put_text("devices", d, "info", "type", (int)info.type >= 1 && (int)info.type <= 8 ? types[info.type] : "?");
        bench_put_text("devices", d, "info", "pci", info.pci_bus_id);
        bench_put_num("devices", d, "info", "list_index", bench_list_index(ctx, d), "", "index in nncl_devices_list()");
        bench_put_num("devices", d, "info", "compute_units", info.compute_units, "", "");
        bench_put_num("devices", d, "info", "clock_mhz", info.clock_mhz, "MHz", "");
        bench_put_num("devices", d, "info", "global_mem_mib", info.global_mem / 1048576.0, "MiB", "");
        bench_put_num("devices", d, "info", "max_alloc_mib", info.max_alloc / 1048576.0, "MiB", "");
        bench_put_num("devices", d, "info", "fp16", info.fp16, "", "cl_khr_fp16");
        bench_put_num("devices", d, "info", "fp64", info.fp64, "", "cl_khr_fp64");
        peak = bench_peak_gflops(ctx, d, method, sizeof method);
        bench_put_num("devices", d, "info", "peak_gflops", peak, "GFLOP/s", method);
    }
}

int bench_wanted(const bench_opts *o, const char *name) {
    const char *p = o->only;
    size_t n = strlen(name);
    if (!o->train && !strcmp(name, "training")) return 0;
    if (!p) return 1;
    while (*p) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, name, n)) return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* 0 when every name of --only LIST is a section; else says which is not,
 * with the sections there are. */
static int main_check_only(const char *list) {
    const char *p = list;
    const bench_section *sec;
    for (;;) {
        size_t len = strcspn(p, ",");
        int known = 0;
        for (sec = bench_sections; sec->name && !known; sec++)
            known = strlen(sec->name) == len && !strncmp(p, sec->name, len);
        if (!known) {
            fprintf(stderr, "bench: --only: unknown section \"%.*s\"; the sections are:", (int)len, p);
            for (sec = bench_sections; sec->name; sec++) fprintf(stderr, " %s", sec->name);
            fputc('\n', stderr);
            return 1;
        }
        if (!p[len]) return 0;
        p += len + 1;
    }
}

static void main_command(int argc, char **argv, bench_opts *o) {
    size_t used = 0;
    int i;
    o->command[0] = 0;
    for (i = 0; i < argc && used + 2 < sizeof o->command; i++)
        used += (size_t)snprintf(o->command + used, sizeof o->command - used, "%s%s", i ? " " : "", argv[i]);
}

int main(int argc, char **argv) {
    bench_opts o;
    nncl_config cfg = nncl_config_default();
    nncl_context *ctx = NULL;
    nncl_status st;
    const bench_section *sec;
    static char self[4096];
    int i, nd, rc = 0, sizes_given = 0, repeats_given = 0, seconds_given = 0;
    memset(&o, 0, sizeof o);
    o.train = 1;
    o.batch = 100;
    o.data_dir = "/usr/share/datasets/fashion-mnist";
    main_command(argc, argv, &o);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            main_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--list")) {
            for (sec = bench_sections; sec->name; sec++) printf("%s\t%s\n", sec->name, sec->title);
            return 0;
        } else if (!strcmp(a, "--quick")) {
            o.quick = 1;
        } else if (!strcmp(a, "--no-train")) {
            o.train = 0;
        } else if (!strcmp(a, "--build-child") && v) {
            int q = 0, k;
            for (k = 1; k < argc; k++) q |= !strcmp(argv[k], "--quick");
            return bench_build_child(v, q);
        } else if (!strcmp(a, "--first-step") && v) {
            int k;
            for (k = 1; k < argc; k++)
                if (!strcmp(argv[k], "--devices") && k + 1 < argc) o.devices = argv[k + 1];
            return bench_first_step(&o, v);
        } else if (v && !strcmp(a, "--devices")) {
            o.devices = v, i++;
        } else if (v && !strcmp(a, "--only")) {
            o.only = v, i++;
            if (main_check_only(v)) return 2;
        } else if (v && !strcmp(a, "--models")) {
            const char *q = v;
            while (*q) {
                size_t len = strcspn(q, ",");
                if (!((len == 3 && (!strncmp(q, "mlp", 3) || !strncmp(q, "cnn", 3) || !strncmp(q, "gpt", 3) ||
                                    !strncmp(q, "vgg", 3))) ||
                      (len == 4 && !strncmp(q, "lstm", 4)) || (len == 6 && !strncmp(q, "resnet", 6)) ||
                      (len == 9 && (!strncmp(q, "gpt_large", 9) || !strncmp(q, "mobilenet", 9))))) {
                    fprintf(stderr, "bench: --models takes mlp, cnn, lstm, vgg, resnet, mobilenet, gpt and gpt_large, "
                            "comma-separated, got \"%s\"\n", v);
                    return 2;
                }
                q += len + (q[len] == ',');
            }
            o.models = v, i++;
        } else if (v && !strcmp(a, "--sizes")) {
            if (main_sizes(v, &o)) {
                fprintf(stderr, "bench: --sizes wants sizes 1..16384 separated by commas, got \"%s\"\n", v);
                return 2;
            }
            sizes_given = 1, i++;
        } else if (v && !strcmp(a, "--repeats")) {
            o.repeats = atoi(v), i++, repeats_given = 1;
            if (o.repeats < 1 || o.repeats > 64) {
                fprintf(stderr, "bench: --repeats wants 1..64, got \"%s\"\n", v);
                return 2;
            }
        } else if (v && !strcmp(a, "--batch")) {
            o.batch = atoi(v), i++;
            if (o.batch < 1 || o.batch > 4096) {
                fprintf(stderr, "bench: --batch wants 1..4096, got \"%s\"\n", v);
                return 2;
            }
        } else if (v && !strcmp(a, "--seconds")) {
            o.seconds = atof(v), i++, seconds_given = 1;
            if (!(o.seconds > 0 && o.seconds <= 60)) {
                fprintf(stderr, "bench: --seconds wants a duration in (0, 60], got \"%s\"\n", v);
                return 2;
            }
        } else if (v && !strcmp(a, "--json")) {
            o.json = v, i++;
        } else if (v && !strcmp(a, "--csv")) {
            o.csv = v, i++;
        } else if (v && !strcmp(a, "--svg")) {
            o.svg = v, i++;
        } else if (v && !strcmp(a, "--data")) {
            o.data_dir = v, i++;
        } else {
            fprintf(stderr, "bench: unknown option or missing value: %s\n", a);
            main_usage(stderr);
            return 2;
        }
    }
    if (!sizes_given) {
        static const int full[] = {128, 256, 512, 1024, 2048}, quick[] = {64, 128};
        const int *s = o.quick ? quick : full;
        o.n_sizes = o.quick ? 2 : 5;
        for (i = 0; i < o.n_sizes; i++) o.sizes[i] = s[i];
    }
    if (!repeats_given) o.repeats = o.quick ? 3 : 5;
    if (!seconds_given) o.seconds = o.quick ? 0.03 : 0.2;
    {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) self[n] = 0;
        else snprintf(self, sizeof self, "%s", argv[0]);
        o.self = self;
    }

    if (!o.devices) o.devices = getenv("NNCL_DEVICES");
    if (!o.devices || !*o.devices) o.devices = "all";
    cfg.devices = o.devices;
    if ((st = nncl_init(&cfg, &ctx)) != NNCL_OK) {
        fprintf(stderr, "bench: no devices (%s): %s\n", nncl_status_str(st), nncl_last_error(NULL));
        return 1;
    }
    nd = nncl_device_count(ctx);
    {
        int steps = 0;
        for (sec = bench_sections; sec->name; sec++)
            if (sec->run && bench_wanted(&o, sec->name)) steps += sec->steps ? sec->steps(&o, nd) : nd;
        bench_progress_init(steps);
    }
    bench_monitor_start(ctx);
    bench_devices(&o, ctx);
    main_devices(ctx);
    fflush(stdout);
    for (sec = bench_sections; sec->name; sec++) {
        const bench_section *part;
        if (!sec->run || !bench_wanted(&o, sec->name)) continue;
        sec->run(&o, ctx);
        if (!sec->steps)
            for (i = 0; i < nd; i++) bench_progress_step();
        bench_monitor_note_memory(ctx);
        bench_progress_done();
        bench_print_section(stdout, sec->name, sec->title);
        for (part = bench_sections; part->name; part++)
            if (part->part_of && !strcmp(part->part_of, sec->name)) bench_print_section(stdout, part->name, part->title);
        fflush(stdout);
    }
    bench_monitor_note_memory(ctx);
    bench_monitor_stop();
    for (sec = bench_sections; strcmp(sec->name, "monitor"); sec++) {}
    bench_print_section(stdout, sec->name, sec->title);
    fflush(stdout);

    {
        /* The closing lines name what was written, one file a line. */
        const char *what[3], *paths[3];
        int k, ok[3], wrote = 0;
        what[0] = "JSON", paths[0] = o.json, ok[0] = !o.json || !bench_write_json(o.json, &o, ctx);
        what[1] = "CSV", paths[1] = o.csv, ok[1] = !o.csv || !bench_write_csv(o.csv);
        what[2] = "SVG", paths[2] = o.svg, ok[2] = !o.svg || !bench_write_svg(o.svg);
        printf("\n");
        for (k = 0; k < 3; k++) {
            if (!paths[k]) continue;
            if (!ok[k]) {
                fprintf(stderr, "bench: cannot write %s %s%s%s\n", what[k], paths[k], k == 2 ? " (no training figures?): " : "",
                        k == 2 ? nncl_last_error(NULL) : "");
                rc = 1;
                continue;
            }
            printf("wrote %s %s\n", what[k], paths[k]);
            wrote++;
        }
        if (!wrote) printf("wrote no files (--json, --csv, --svg FILE keep the results)\n");
    }
    bench_blas_unload();
    bench_recs_free();
    nncl_free(ctx);
    return rc;
}
