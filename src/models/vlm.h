/* vlm.h - the vision side of a vision-language checkpoint: how its image processor prepares an
 * image (preprocessor_config.json, with the family's defaults), how many placeholder tokens one
 * image takes and how the processor writes them into the prompt, and the encoder (vision tower +
 * projector) from pixel values to rows of the text decoder's input (models/decoder.h's media
 * blocks). One implementation per family (vlm_<family>.c); mxl_vlm_load picks it by model_type.
 * Adding a family: its vlm_<family>.c with a loader that fills an mxl_vlm (prepare when its
 * processor is not a plain resize: tiles, native resolution), one line in mxl_vlm_load. */
#ifndef MXL_MODELS_VLM_H
#define MXL_MODELS_VLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/threadpool.h"
#include "models/checkpoint.h"
#include "image/image.h"
#include "models/decoder.h"

/* The processor's steps for one image (transformers' PIL image processors). */
typedef struct mxl_vlm_preproc {
    int64_t width, height; /* the resize target */
    int resample;          /* PIL's filter numbering, as preprocessor_config.json writes it:
                            * 0 nearest, 1 lanczos, 2 bilinear, 3 bicubic */
    bool do_resize, do_rescale, do_normalize;
    double rescale;        /* usually 1 / 255 */
    float mean[3], std[3];
} mxl_vlm_preproc;

/* One image made ready for the tower: the processor's output for it. */
typedef struct mxl_vlm_input {
    float *pixels;      /* the tower's input, in the family's layout (the default: [3, h, w]) */
    size_t n_pixels;    /* floats in pixels */
    int64_t n_tokens;   /* placeholder tokens the image takes in the prompt = rows encode writes */
    int64_t grid[4];    /* family-defined shape facts (e.g. patch rows / columns, tiles) */
    char *text;         /* what replaces the image's marker in the prompt */
    size_t text_len;
} mxl_vlm_input;

typedef struct mxl_vlm mxl_vlm;
struct mxl_vlm {
    const char *family;        /* "gemma3" */
    mxl_vlm_preproc pre;
    int64_t tokens_per_image;  /* placeholder tokens of one image (the default prepare's) */
    int64_t text_hidden;       /* width of the rows an image becomes */
    int32_t image_token;       /* the placeholder token's id */
    bool causal_images;        /* image rows attend causally (else each run of them bidirectionally) */
    bool prefix_lm;            /* the whole prompt is one bidirectional block (PaliGemma: the processor's
                                * token_type_ids are 0 on every prompt token), the generated text causal */
    bool mrope_grid;           /* the decoder places image rows by M-RoPE: each image's grid[1], grid[2] are
                                * its token grid's rows and columns (its run of placeholders must be whole) */
    int n_deep;                /* DeepStack (Qwen3-VL): encode writes 1 + n_deep slabs of [n_tokens,
                                * text_hidden], the rows and then what the decoder's first n_deep layers
                                * add to them (mxl_vlm_rows_floats, mxl_vlm_point_block) */
    const char *marker;        /* what the chat template writes for an image ("<start_of_image>") */
    const char *image_text;    /* the placeholder token's text ("<image_soft_token>") */
    const char *before, *after; /* the default prepare's text around the placeholders */
    /* Optional (NULL: resize to pre.width x pre.height with pre.resample, rescale and normalise
     * into [3, h, w]; tokens_per_image tokens; text before + tokens x image_text + after). */
    mxl_status (*prepare)(const mxl_vlm *v, const mxl_image *im, mxl_vlm_input *out, mxl_error *err);
    /* Optional: the processor writes the prompt itself, with no chat template (PaliGemma): the
     * user's text and image count -> the prompt with one marker per image, to be tokenized as it
     * is (special tokens parsed, none added); bos: the tokenizer's BOS text. *out: mxl_free. */
    mxl_status (*prompt)(const mxl_vlm *v, const char *text, size_t len, int n_images, const char *bos, size_t bos_len, char **out,
                         size_t *out_len, mxl_error *err);
    /* Optional: the processor's replacements over the whole expanded prompt (Idefics2's), *text
     * (mxl_free'd and replaced) of *len bytes. */
    mxl_status (*finish_prompt)(const mxl_vlm *v, char **text, size_t *len, mxl_error *err);
    /* out [in->n_tokens, text_hidden]: the image's rows for the decoder (1 + n_deep such slabs) */
    mxl_status (*encode)(const mxl_vlm *v, const mxl_vlm_input *in, mxl_threadpool *pool, float *out, mxl_error *err);
    void (*destroy)(mxl_vlm *v);
};

/* The vision side of ck: *out NULL (and MXL_OK) when ck is a text-only checkpoint (no vision tower
 * in its weights, no vision_config, or language_model_only); MXL_ERR_UNSUPPORTED naming the family
 * when it has a tower mlxcel does not run yet. */
mxl_status mxl_vlm_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err);
void mxl_vlm_free(mxl_vlm *v);

/* CLIP's mean / std with BICUBIC resize, rescale 1/255 and normalisation on, no fixed size: the
 * defaults of the Qwen2-VL and Pixtral image processors. */
mxl_vlm_preproc mxl_vlm_preproc_clip_bicubic(void);
/* An image processor config's (j: preprocessor_config.json or a processor_config.json section)
 * rescale_factor, image_mean / image_std (also as doubles into mean_d when not NULL) and
 * do_resize / do_rescale / do_normalize over p's values. */
void mxl_vlm_preproc_json(const json_t *j, mxl_vlm_preproc *p, double mean_d[3]);
/* preprocessor_config.json's size, resample, rescale_factor, image_mean / image_std and do_* flags
 * over p's defaults (the file absent: p as it is); *image_seq_length its tokens per image (-1:
 * absent; NULL: not wanted). */
mxl_status mxl_vlm_read_preproc(const mxl_checkpoint *ck, mxl_vlm_preproc *p, int64_t *image_seq_length, mxl_error *err);
/* The decoded image through the family's processor (v->prepare or the default). */
mxl_status mxl_vlm_prepare(const mxl_vlm *v, const mxl_image *im, mxl_vlm_input *out, mxl_error *err);
/* pixels [3, pre.height, pre.width] = the image resized and normalised as v->pre says (the
 * default prepare's pixels; mxl_free). */
mxl_status mxl_vlm_pixels(const mxl_vlm *v, const mxl_image *im, float **pixels, mxl_error *err);
void mxl_vlm_input_free(mxl_vlm_input *in);

/* Loader helpers the families share. The JSON file at path into *out (NULL, MXL_OK: no such
 * file). */
mxl_status mxl_vlm_json_if(const char *path, json_t **out, mxl_error *err);
/* dst = o[key] when that is a non-empty string shorter than cap (else dst unchanged). */
void mxl_vlm_str_key(const json_t *o, const char *key, char *dst, size_t cap);
/* The image processor's settings: preprocessor_config.json, else processor_config.json's
 * "image_processor" (*image_processor NULL: neither); proc (NULL: not wanted) gets
 * processor_config.json itself (NULL when absent). Both json_decref'd by the caller. */
mxl_status mxl_vlm_processor_files(const mxl_checkpoint *ck, json_t **image_processor, json_t **proc, mxl_error *err);
/* processor_config.json's `key` (proc; its tokens per image or tile), when present, must be want. */
mxl_status mxl_vlm_check_seq_len(const mxl_checkpoint *ck, const json_t *proc, const char *key, int64_t want, mxl_error *err);
/* tokenizer_config.json of the checkpoint into *out (NULL when absent). */
mxl_status mxl_vlm_tokenizer_config(const mxl_checkpoint *ck, json_t **out, mxl_error *err);
/* config.json's image_token_index or image_token_id (dflt when neither). */
mxl_status mxl_vlm_image_token(const mxl_checkpoint *ck, int64_t dflt, int32_t *out, mxl_error *err);
/* The rescale factor, mean and std p's do_rescale / do_normalize leave in force. */
void mxl_vlm_norm_params(const mxl_vlm_preproc *p, double *rescale, const float **mean, const float **std);
/* For the _mmproj loaders: the id of the vocabulary entry `text` in a text GGUF's
 * tokenizer.ggml.tokens (-1: none); an mmproj's clip.vision.image_mean / image_std over p's. */
int64_t mxl_vlm_gguf_token_id(const mxl_checkpoint *ck, const char *text);
void mxl_vlm_gguf_mean_std(const mxl_checkpoint *mm, mxl_vlm_preproc *p);
/* Floats encode writes for the image in (its rows and DeepStack slabs). */
size_t mxl_vlm_rows_floats(const mxl_vlm *v, const mxl_vlm_input *in);
/* Media block b takes image in's encoded rows (encode's output) from row off on: emb, and the
 * DeepStack slabs when v has them. */
void mxl_vlm_point_block(const mxl_vlm *v, const mxl_vlm_input *in, const float *rows, int64_t off, mxl_decoder_media *b);

/* The rendered prompt with image i's marker replaced by inputs[i].text (then v->finish_prompt);
 * *out (mxl_free) NUL-terminated. Fails when the prompt's marker count is not n_images. */
mxl_status mxl_vlm_expand_prompt(const mxl_vlm *v, const char *text, size_t len, const mxl_vlm_input *inputs, int n_images,
                                 char **out, size_t *out_len, mxl_error *err);

/* Where the images' rows go in a tokenized prompt: image i's n_tokens rows take the next
 * n_tokens positions of the image token, in order; each maximal run of them is one media block
 * (decoder.h; causal as v says, emb NULL: the caller points block b at rows of image img[b] from
 * row off[b] once they are encoded). With v->prefix_lm the text rows between and around them are
 * blocks too (img[b] -1: they keep their token embeddings), all joined into one block over the
 * whole prompt. Fails when the counts do not match. */
mxl_status mxl_vlm_media_blocks(const mxl_vlm *v, const int32_t *ids, size_t n, const mxl_vlm_input *inputs, int n_images,
                                mxl_decoder_media *blocks, int *img, int64_t *off, int max_blocks, int *n_blocks, mxl_error *err);

/* GotOcr2ImageProcessor's tiling (vlm_gotocr2.c; Aya Vision, InternVL): tiles of S x S. */
typedef struct mxl_vlm_gotocr2 {
    int64_t S;                    /* the tile side: size.height = size.width = the tower's image size */
    bool crop;                    /* crop_to_patches */
    int64_t min_tiles, max_tiles; /* min_patches, max_patches */
} mxl_vlm_gotocr2;
/* The image processor's settings j over p's and g's (the family's defaults; g->S set): size (must
 * be S x S), resample, rescale / mean / std / do_* (mxl_vlm_preproc_json; do_resize false
 * refused), crop_to_patches, min_patches / max_patches. */
mxl_status mxl_vlm_gotocr2_read(const mxl_checkpoint *ck, const json_t *j, mxl_vlm_preproc *p, mxl_vlm_gotocr2 *g, mxl_error *err);
/* *pixels [*n_tiles, 3, S, S] (mxl_free): the *rows x *cols tiles row by row, then the thumbnail
 * when there is more than one tile (one tile: the image resized to S x S). */
mxl_status mxl_vlm_gotocr2_tiles(const mxl_vlm_preproc *p, const mxl_vlm_gotocr2 *g, const mxl_image *im, float **pixels, int64_t *n_tiles,
                                 int64_t *rows, int64_t *cols, mxl_error *err);

/* Family loaders (vlm_<family>.c). The _mmproj forms read the tower from llama.cpp's mmproj GGUF
 * beside a GGUF text model (they take mm over, closing it on failure too). */
mxl_status mxl_vlm_gemma3_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err);
mxl_status mxl_vlm_gemma3_load_mmproj(const mxl_checkpoint *ck, mxl_checkpoint *mm, mxl_vlm **out, mxl_error *err);
mxl_status mxl_vlm_llava_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err);
mxl_status mxl_vlm_paligemma_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err);
mxl_status mxl_vlm_qwen2vl_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err); /* qwen2_vl, qwen2_5_vl, qwen3_vl */
/* vlm_pixtral.c: Mistral 3, and LLaVA with a Pixtral tower (mxl_vlm_llava_load hands it over) */
mxl_status mxl_vlm_mistral3_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err);
mxl_status mxl_vlm_llava_pixtral_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err);
mxl_status mxl_vlm_llava_next_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err);
mxl_status mxl_vlm_aya_vision_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err);
mxl_status mxl_vlm_internvl_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err);
mxl_status mxl_vlm_idefics2_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err);
mxl_status mxl_vlm_idefics3_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err); /* idefics3, smolvlm */
mxl_status mxl_vlm_idefics3_load_mmproj(const mxl_checkpoint *ck, mxl_checkpoint *mm, mxl_vlm **out, mxl_error *err);
mxl_status mxl_vlm_pixtral_load_mmproj(const mxl_checkpoint *ck, mxl_checkpoint *mm, mxl_vlm **out, mxl_error *err);
mxl_status mxl_vlm_qwen2vl_load_mmproj(const mxl_checkpoint *ck, mxl_checkpoint *mm, mxl_vlm **out, mxl_error *err);

#endif
