/* mpi_train.c - data parallelism across processes: every rank trains the
 * same MLP on its part of each global batch and the trainer averages the
 * gradients through MPI_Allreduce. Run with -np 1 it writes the reference
 * parameters; with -np N and --compare REF it checks that N ranks end where
 * one process with the same global batch ends. Step 6 carries a NaN in the
 * last sample (the last rank's slice): every rank must skip it and keep its
 * parameters. Dynamic loss scaling is on (from 2^10, growth every 3 clean
 * steps; a power of two, so the parameters are those of an unscaled run):
 * every rank must use the same scale at every step, and halve it after step
 * 6. Built by tests/test_mpi.sh. */
#include "nncl.h"
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MT_N 240
#define MT_D 6
#define MT_B 40

int main(int argc, char **argv) {
    float x[MT_N * MT_D], y[MT_N];
    nncl_config cfg = nncl_config_default();
    nncl_train_config tc = nncl_train_default();
    nncl_context *ctx = NULL;
    nncl_graph *g;
    nncl_node *in, *lab, *loss;
    nncl_trainer *t = NULL;
    int rank, size, i, k, xs[1] = {MT_D}, rc = 0;
    float scale6 = 0;
    unsigned seed = 5;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (i = 0; i < MT_N; i++) {
        y[i] = (float)(i % 3);
        for (k = 0; k < MT_D; k++) {
            seed = seed * 1664525u + 1013904223u;
            x[i * MT_D + k] = (k % 3 == i % 3 ? 2.0f : 0.0f) + (float)(seed >> 8) / 16777216.0f;
        }
    }
    cfg.devices = "0";
    if (nncl_init(&cfg, &ctx) != NNCL_OK) {
        printf("SKIP mpi: no device: %s\n", nncl_last_error(NULL));
        MPI_Finalize();
        return 0;
    }
    g = nncl_graph_create(ctx, 11);
    in = nncl_input(g, "x", 1, xs);
    lab = nncl_input(g, "y", 0, NULL);
    loss = nncl_softmax_cross_entropy(
        g, nncl_linear(g, nncl_linear(g, in, 8, 1, NNCL_ACT_TANH, "fc1"), 3, 1, NNCL_ACT_NONE, "fc2"), lab);
    tc.max_batch = MT_B;
    tc.optim = nncl_optim_default(NNCL_OPT_ADAM);
    tc.optim.lr = 0.01f;
    tc.loss_scaling = 1;
    tc.loss_scale_init = 1024.0f;
    tc.loss_scale_growth_interval = 3;
    if (!loss || nncl_trainer_create(ctx, g, loss, &tc, &t) != NNCL_OK) {
        printf("FAIL mpi: trainer: %s\n", nncl_last_error(ctx));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (i = 0; i < 12; i++) { /* rank r takes its slice of each global batch */
        int start = (i * MT_B) % (MT_N - MT_B + 1), lo = MT_B * rank / size, hi = MT_B * (rank + 1) / size;
        nncl_feed f[2];
        nncl_step_info info;
        float before[48], after[48], keep = x[(start + MT_B - 1) * MT_D];
        if (i == 6) x[(start + MT_B - 1) * MT_D] = NAN;
        nncl_trainer_param_get(t, "fc1.weight", before, 48);
        f[0].node = in;
        f[0].data = x + (size_t)(start + lo) * MT_D;
        f[1].node = lab;
        f[1].data = y + start + lo;
        if (nncl_trainer_step(t, f, 2, hi - lo, &info) != NNCL_OK) {
            printf("FAIL mpi: step %d on rank %d: %s\n", i, rank, nncl_last_error(ctx));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        x[(start + MT_B - 1) * MT_D] = keep;
        {
            float lo_s = info.loss_scale, hi_s = info.loss_scale;
            MPI_Allreduce(MPI_IN_PLACE, &lo_s, 1, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
            MPI_Allreduce(MPI_IN_PLACE, &hi_s, 1, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
            if (lo_s != hi_s || info.overflow != (i == 6) || (i == 7 && info.loss_scale != scale6 * 0.5f)) {
                printf("FAIL mpi: step %d on rank %d: loss scale %g (ranks %g..%g), overflow %d\n", i, rank,
                       (double)info.loss_scale, (double)lo_s, (double)hi_s, info.overflow);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            if (i == 6) scale6 = info.loss_scale;
        }
        nncl_trainer_param_get(t, "fc1.weight", after, 48);
        if (i == 6 && (!info.skipped || memcmp(before, after, sizeof before) != 0 || nncl_trainer_step_count(t) != 6)) {
            printf("FAIL mpi: the NaN step was not skipped on rank %d of %d\n", rank, size);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    if (rank == 0 && size > 1) printf("PASS mpi: a NaN in rank %d's slice is skipped on all %d ranks\n", size - 1, size);
    if (rank == 0 && size > 1)
        printf("PASS mpi: the loss scale is the same on all %d ranks at every step and halves after the NaN\n", size);
    if (rank == 0 && argc >= 2 && strcmp(argv[1], "--compare") != 0) {
        if (nncl_trainer_save(t, argv[1]) != NNCL_OK) rc = 1;
    } else if (rank == 0 && argc >= 3) {
        nncl_safetensors *ref = NULL;
        double num = 0, den = 0;
        if (nncl_safetensors_load(argv[2], &ref) != NNCL_OK) {
            printf("FAIL mpi: %s\n", nncl_last_error(NULL));
            rc = 1;
        }
        for (i = 0; rc == 0 && i < nncl_safetensors_count(ref); i++) {
            nncl_safetensors_entry e;
            float *mine;
            size_t j;
            nncl_safetensors_get(ref, i, &e);
            mine = (float *)malloc(e.numel * sizeof(float));
            if (nncl_trainer_param_get(t, e.name, mine, e.numel) != NNCL_OK) rc = 1;
            for (j = 0; rc == 0 && j < e.numel; j++) {
                num += ((double)mine[j] - e.data[j]) * ((double)mine[j] - e.data[j]);
                den += (double)e.data[j] * e.data[j];
            }
            free(mine);
        }
        if (rc == 0 && num / den < 1e-10)
            printf("PASS mpi: %d ranks equal one process with the same global batch (difference %.2g)\n", size, num / den);
        else
            printf("FAIL mpi: %d ranks differ from one process (normalised squared difference %.3g)\n", size,
                   den > 0 ? num / den : -1.0);
        nncl_safetensors_free(ref);
    }
    nncl_trainer_free(t);
    nncl_graph_free(g);
    nncl_free(ctx);
    MPI_Finalize();
    return rc;
}
