// The patched build's CPU flash attention against ggml's own reference kernel (the CPU backend with use_ref), on
// masks shaped as llama.cpp builds them for a unified KV cache: several sequences' rows in one batch, each seeing a
// shared prefix and its own cells scattered through the buffer, beside the dense causal mask of one sequence.
// Prints one line per case (NMSE and largest difference) and exits 1 when one is off.
// Built and run by flash-attn.sys.test.ts against the patched build's libraries.
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>
#include <vector>

struct Case {
    const char * name;
    int rows;   // query rows in the batch
    int cells;  // KV cells
    int seqs;   // sequences the rows belong to (1: one causal sequence)
    int families = 0;           // prefix families (sequence s in family s % families); 0: the even sequences share one
    float max_bias = 0.0f;      // ALiBi: visible cells then carry a distance in the mask, scaled per head
    float softcap = 0.0f;
};

// Which cells each row sees: per sequence a shared prefix (sequences of even id share one, or one per family, the
// prefix cut in that many runs), then its own cells scattered at random over the rest of the buffer, causal within
// the sequence. With ALiBi a visible cell's value is minus its distance from the buffer's end, over 64.
static std::vector<float> make_mask(const Case & c, std::mt19937 & rng) {
    std::vector<float> mask((size_t) c.rows * c.cells, -INFINITY);
    if (c.seqs == 1) {
        for (int r = 0; r < c.rows; r++) {
            for (int k = 0; k <= c.cells - c.rows + r; k++) mask[(size_t) r * c.cells + k] = 0.0f;
        }
        return mask;
    }
    const int prefix = c.families > 0 ? c.cells / 2 : c.cells / 8;
    std::vector<int> owner(c.cells, -1);  // the sequence whose own cell it is (-1: the shared prefix)
    std::vector<std::vector<int>> own(c.seqs);
    for (int k = prefix; k < c.cells; k++) {
        owner[k] = (int) (rng() % c.seqs);
        own[owner[k]].push_back(k);
    }
    for (int r = 0; r < c.rows; r++) {
        const int s = r % c.seqs;
        float * row = mask.data() + (size_t) r * c.cells;
        if (c.families > 0) {
            const int f = s % c.families, run = prefix / c.families;
            for (int k = f * run; k < (f + 1) * run; k++) row[k] = 0.0f;
        } else if (s % 2 == 0) {
            for (int k = 0; k < prefix; k++) row[k] = 0.0f;
        }
        // causal: the row's position among its sequence's cells
        const size_t upto = own[s].size() * (size_t) (r / c.seqs + 1) / (size_t) ((c.rows + c.seqs - 1) / c.seqs);
        for (size_t i = 0; i < upto && i < own[s].size(); i++) row[own[s][i]] = 0.0f;
        if (c.families == 0 && s % 2 == 1 && upto == 0 && !own[s].empty()) row[own[s][0]] = 0.0f;  // every row sees a cell
        if (c.max_bias > 0.0f) {
            for (int k = 0; k < c.cells; k++) {
                if (row[k] == 0.0f) row[k] = -(float) (c.cells - k) / 64.0f;
            }
        }
    }
    return mask;
}

static std::vector<float> run(const Case & c, const std::vector<float> & q, const std::vector<ggml_fp16_t> & k,
                              const std::vector<ggml_fp16_t> & v, const std::vector<ggml_fp16_t> & mask, bool ref,
                              int D, int heads, int kv_heads) {
    ggml_init_params params = {256 * 1024 * 1024, nullptr, false};
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * tq = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, D, c.rows, heads, 1);
    ggml_tensor * tk = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, D, c.cells, kv_heads, 1);
    ggml_tensor * tv = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, D, c.cells, kv_heads, 1);
    ggml_tensor * tm = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, c.cells, c.rows, 1, 1);
    memcpy(tq->data, q.data(), ggml_nbytes(tq));
    memcpy(tk->data, k.data(), ggml_nbytes(tk));
    memcpy(tv->data, v.data(), ggml_nbytes(tv));
    memcpy(tm->data, mask.data(), ggml_nbytes(tm));
    ggml_tensor * out = ggml_flash_attn_ext(ctx, tq, tk, tv, tm, 1.0f / sqrtf((float) D), c.max_bias, c.softcap);
    ggml_prec_set_acc(out, GGML_PREC_F32);
    ggml_cgraph * graph = ggml_new_graph(ctx);
    ggml_build_forward_expand(graph, out);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 2);
    ggml_backend_cpu_set_use_ref(cpu, ref);
    ggml_backend_graph_compute(cpu, graph);
    std::vector<float> result((const float *) out->data, (const float *) out->data + ggml_nelements(out));
    ggml_backend_free(cpu);
    ggml_free(ctx);
    return result;
}

int main() {
    const int D = 64, heads = 8, kv_heads = 4;
    const Case cases[] = {
        {"unified, 150 rows of 8 sequences, 1000 cells", 150, 1000, 8},
        {"unified, 64 rows of 32 sequences, 4096 cells", 64, 4096, 32},
        {"unified, 40 rows of 40 sequences, 2000 cells", 40, 2000, 40},
        {"unified, 512 rows of 3 sequences, 3000 cells", 512, 3000, 3},
        {"one causal sequence, 200 rows, 700 cells", 200, 700, 1},
        {"unified, 32 rows of 32 sequences in 4 prefix families, 2048 cells", 32, 2048, 32, 4},
        {"unified, 96 rows of 12 sequences in 3 prefix families, 3000 cells", 96, 3000, 12, 3},
        {"unified, 3 rows of 3 sequences in 1 prefix family, 600 cells", 3, 600, 3, 1},
        {"unified, 24 rows of 8 sequences in 2 prefix families, 900 cells, ALiBi and a softcap", 24, 900, 8, 2, 8.0f, 30.0f},
    };
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    bool ok = true;
    for (const Case & c : cases) {
        std::vector<float> q((size_t) D * c.rows * heads);
        std::vector<ggml_fp16_t> k((size_t) D * c.cells * kv_heads), v(k.size());
        for (float & x : q) x = dist(rng);
        for (ggml_fp16_t & x : k) x = ggml_fp32_to_fp16(dist(rng));
        for (ggml_fp16_t & x : v) x = ggml_fp32_to_fp16(dist(rng));
        std::vector<float> mask32 = make_mask(c, rng);
        std::vector<ggml_fp16_t> mask(mask32.size());
        for (size_t i = 0; i < mask32.size(); i++) mask[i] = ggml_fp32_to_fp16(mask32[i]);
        const std::vector<float> fast = run(c, q, k, v, mask, false, D, heads, kv_heads);
        const std::vector<float> ref = run(c, q, k, v, mask, true, D, heads, kv_heads);
        double err = 0.0, norm = 0.0, worst = 0.0;
        for (size_t i = 0; i < ref.size(); i++) {
            const double d = (double) fast[i] - ref[i];
            err += d * d;
            norm += (double) ref[i] * ref[i];
            worst = std::fmax(worst, std::fabs(d));
        }
        const double nmse = err / norm;
        // The kernels differ in summation order and in F16 accumulators only: 1e-6 to 1.4e-5 and under 1.2e-3 here.
        // A 1% error in the softmax sum fails 4 of these cases when put in the gathered tiles, 6 in the pairwise path.
        // Every case is shaped to take the tiled kernel, whose order differs from the reference's: equal results would
        // mean the case no longer tests it.
        const bool good = std::isfinite(nmse) && nmse > 0.0 && nmse < 4e-5 && worst < 2.5e-3;
        printf("%s %s: nmse %.3g, largest difference %.3g\n", good ? "ok" : "FAIL", c.name, nmse, worst);
        ok = ok && good;
    }
    return ok ? 0 : 1;
}
