/* The plume_linear both quant plugins (quant-gptq, quant-awq) hand to the
 * core, over GPTQ-layout arrays (gptq_cuda_layer_desc: AWQ layers are
 * converted to them first): one destroy/shape/forward for both, so each
 * plugin keeps only its config, probe and load.
 *
 * Two places a layer can live, chosen at load by the backend instance:
 *   host:   a backend with host_ptr (cpu): the repacked gptq_layer run by
 *           the fast CPU kernels on bvt->parallel_for (as before);
 *   device: a backend with backend.h's device hooks whose device_info api
 *           is "cuda": the packed weights go to the device once, through
 *           buf_alloc + upload, in the layout of quant-gptq's CUDA kernels
 *           (gptq_cuda_prepare); forward enqueues those kernels on the
 *           backend's stream over the backend's activation buffers
 *           (device_ptr): no host round trip.  Decode-sized batches and
 *           every batch of a batch-invariant instance run the GEMV kernel
 *           (each row the same bits whatever n_tok); otherwise batches of
 *           more than GPTQ_CUDA_GEMV_MAXTOK rows dequantize column slabs
 *           into device_scratch and run device_gemm (tf32).
 * Anything else is refused at load, naming the method and the backend. */
#ifndef PLUME_INT4_LINEAR_H
#define PLUME_INT4_LINEAR_H

#include "cuda/gptq_cuda_dev.h"
#include "gptq_layer.h"
#include "plume/linear.h"

/* Loads one layer for backend b: d (the caller's arrays, which may be
 * freed on return) and cfg (how a host layer is built) describe it; k is
 * the device kernels (gptq_cuda_dev_kernels() in a build with nvcc, a
 * test's table, or NULL when built without them: a device backend is then
 * refused).  method ("gptq", "awq") and prefix name the layer in
 * messages. */
int int4_linear_load(const char *method, const char *prefix, const gptq_cuda_layer_desc *d,
                     const gptq_load_config *cfg, const gptq_dev_kernels *k,
                     const plume_backend_vtable *bvt, plume_backend *b, plume_linear **out,
                     plume_error *err);

/* The device kernels the providers pass to int4_linear_load: quant-gptq's
 * CUDA kernels (gptq_cuda_dev_kernels()) in a build with nvcc, else NULL. */
const gptq_dev_kernels *int4_linear_dev_kernels(void);

/* The plume_linear_vtable slots, shared by both providers. */
void int4_linear_destroy(plume_linear *l);
void int4_linear_shape(const plume_linear *l, int64_t *in, int64_t *out);
int int4_linear_forward(plume_linear *l, const plume_backend_vtable *bvt, plume_backend *b,
                        const plume_buf *x, int32_t n_tok, plume_buf *y, plume_error *err);

/* True when the layer was loaded onto the backend's device; its device
 * bytes in *bytes (NULL: not wanted). */
bool int4_linear_on_device(const plume_linear *l, size_t *bytes);

/* A device layer's bound on the prefill slab (default 256 MiB; at least
 * one 128-column slab is used whatever the bound): tests set it low to
 * run several slabs. */
void int4_linear_set_slab_limit(plume_linear *l, size_t bytes);

#endif
