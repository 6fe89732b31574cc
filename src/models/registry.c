/* registry.c - the static family table behind registry.h, transcribed row by row from
 * ../shared/spec/supported-models.md (section order kept, so `mlxcel arch` lists families the
 * way the spec does), plus the build-support table that says what this build runs.
 *
 * Conventions of the table:
 *  - model_types are lower-case because detection lower-cases config.json's model_type (the spec
 *    spells two keys capitalized: Klear and GOT).
 *  - A key may be claimed by several families only where the spec makes them share it; the
 *    `select` rule (or, across tasks, the architecture / embedding rules in detect.c) tells them
 *    apart. tests/unit/test_registry.c holds the list of allowed shares.
 *  - `architectures` lists only class names that decide the family on their own.
 *  - Categories group families by vendor line the way the spec's `mlxcel arch` example does;
 *    vision-language families without a text line of their own go under "Other VLM". */
#include "models/registry.h"

#include <ctype.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>

#include "models/decoder_family.h"
#include "models/encoder.h"

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NONE NULL

/* tasks */
#define GEN MXL_TASK_GENERATE
#define S2S MXL_TASK_SEQ2SEQ
#define EMB MXL_TASK_EMBED
#define RRK MXL_TASK_RERANK
#define STT MXL_TASK_SPEECH_TO_TEXT
#define TTS MXL_TASK_TEXT_TO_SPEECH
#define STS MXL_TASK_SPEECH_TO_SPEECH
#define DET MXL_TASK_DETECT
#define PRD MXL_TASK_PREDICT
#define TAG MXL_TASK_TAG
#define EXT MXL_TASK_EXTRACT
#define IMG MXL_TASK_IMAGE_GENERATION
/* forms */
#define TXT MXL_FORM_TEXT
#define VLM MXL_FORM_VLM
#define MMD MXL_FORM_MULTIMODAL
/* select rules */
#define ANY MXL_SELECT_ANY
#define VIS MXL_SELECT_VISION
#define MOE MXL_SELECT_MOE
#define DNS MXL_SELECT_DENSE
#define GRN MXL_SELECT_GRANITE_TEXT
/* modalities */
#define M_T L("text")
#define M_TI L("text", "image")
#define M_TIV L("text", "image", "video")
#define M_TIA L("text", "image", "audio")
#define M_TIVA L("text", "image", "video", "audio")
#define M_I L("image")
#define M_IV L("image", "video")
#define M_A L("audio")

/* Field order: id, display_name, category, task, form, select, model_types, architectures,
 * aliases, runtimes, modalities_in, output. */
static const mxl_family k_families[] = {
    /* ---- Standard Transformer Models ---- */
    {"llama", "Llama 1/2/3 (and Mistral 1/2)", "Llama", GEN, TXT, ANY, L("llama", "mistral"), NONE, L("Mistral 1/2"), NONE, M_T, "text"},
    {"llama4", "Llama 4 (MoE)", "Llama", GEN, TXT, ANY, L("llama4", "llama4_text"), NONE, NONE, NONE, M_T, "text"},
    {"qwen2", "Qwen 2 / 2.5", "Qwen", GEN, TXT, ANY, L("qwen2"), NONE, L("Qwen2.5"), NONE, M_T, "text"},
    {"qwen3", "Qwen 3", "Qwen", GEN, TXT, ANY, L("qwen3"), NONE, NONE, NONE, M_T, "text"},
    {"qwen3_5", "Qwen 3.5 (Transformer + GatedDeltaNet)", "Qwen", GEN, TXT, ANY, L("qwen3_5", "qwen3.5", "qwen3_5_text"), NONE, L("Qwen3.8-27B"), NONE, M_T, "text"},
    {"gemma", "Gemma 1", "Gemma", GEN, TXT, ANY, L("gemma"), NONE, NONE, NONE, M_T, "text"},
    {"gemma2", "Gemma 2", "Gemma", GEN, TXT, ANY, L("gemma2"), NONE, NONE, NONE, M_T, "text"},
    {"gemma3", "Gemma 3", "Gemma", GEN, TXT, ANY, L("gemma3", "gemma3_text"), NONE, NONE, NONE, M_T, "text"},
    {"gemma4", "Gemma 4", "Gemma", GEN, TXT, ANY, L("gemma4", "gemma4_text"), NONE, NONE, NONE, M_T, "text"},
    {"diffusion_gemma", "DiffusionGemma (block diffusion)", "Gemma", GEN, TXT, ANY, L("diffusion_gemma", "diffusion_gemma_text"), NONE, NONE, NONE, M_TI, "text"},
    {"gemma3n", "Gemma 3n", "Gemma", GEN, TXT, ANY, L("gemma3n", "gemma3n_text"), NONE, NONE, NONE, M_T, "text"},
    {"phi", "Phi 1/2", "Phi", GEN, TXT, DNS, L("phi", "phi-msft"), NONE, NONE, NONE, M_T, "text"},
    {"phi3", "Phi 3", "Phi", GEN, TXT, ANY, L("phi3"), NONE, NONE, NONE, M_T, "text"},
    {"phi3small", "Phi 3 Small", "Phi", GEN, TXT, ANY, L("phi3small"), NONE, NONE, NONE, M_T, "text"},
    {"mistral3", "Mistral 3", "Mistral", GEN, TXT, ANY, L("mistral3"), NONE, NONE, NONE, M_T, "text"},
    {"mistral4", "Mistral 4 (MLA)", "Mistral", GEN, TXT, ANY, L("mistral4"), NONE, NONE, NONE, M_T, "text"},
    {"youtu", "Youtu-LLM (MLA)", "Youtu", GEN, TXT, ANY, L("youtu", "youtu_llm"), NONE, NONE, NONE, M_T, "text"},
    {"ministral3", "Ministral 3", "Ministral", GEN, TXT, ANY, L("ministral3"), NONE, NONE, NONE, M_T, "text"},
    {"nemotron", "Nemotron", "Nemotron", GEN, TXT, ANY, L("nemotron"), NONE, NONE, NONE, M_T, "text"},
    {"deepseek", "DeepSeek (v1)", "DeepSeek", GEN, TXT, ANY, L("deepseek"), NONE, NONE, NONE, M_T, "text"},
    {"deepseek_v2", "DeepSeek V2 (MoE)", "DeepSeek", GEN, TXT, ANY, L("deepseek_v2"), NONE, NONE, NONE, M_T, "text"},
    {"deepseek_v3", "DeepSeek V3 (MoE)", "DeepSeek", GEN, TXT, ANY, L("deepseek_v3"), NONE, NONE, NONE, M_T, "text"},
    {"deepseek_v32", "DeepSeek V3.2 (MoE)", "DeepSeek", GEN, TXT, ANY, L("deepseek_v32", "deepseek_v3.2"), NONE, NONE, NONE, M_T, "text"},
    {"deepseek_v4", "DeepSeek V4", "DeepSeek", GEN, TXT, ANY, L("deepseek_v4"), NONE, L("DeepSeek-V4-Flash"), NONE, M_T, "text"},
    {"cohere", "Command-R", "Cohere", GEN, TXT, ANY, L("cohere"), NONE, NONE, NONE, M_T, "text"},
    {"cohere2", "Command-R v2", "Cohere", GEN, TXT, ANY, L("cohere2"), NONE, NONE, NONE, M_T, "text"},
    {"internlm2", "InternLM 2", "InternLM", GEN, TXT, ANY, L("internlm2"), NONE, NONE, NONE, M_T, "text"},
    {"internlm3", "InternLM 3", "InternLM", GEN, TXT, ANY, L("internlm3"), NONE, NONE, NONE, M_T, "text"},
    {"olmo", "OLMo 1", "OLMo", GEN, TXT, ANY, L("olmo"), NONE, NONE, NONE, M_T, "text"},
    {"olmo2", "OLMo 2", "OLMo", GEN, TXT, ANY, L("olmo2"), NONE, NONE, NONE, M_T, "text"},
    {"olmo3", "OLMo 3", "OLMo", GEN, TXT, ANY, L("olmo3"), NONE, NONE, NONE, M_T, "text"},
    {"smollm3", "SmolLM 3", "SmolLM", GEN, TXT, ANY, L("smollm3"), NONE, NONE, NONE, M_T, "text"},
    {"minicpm", "MiniCPM", "MiniCPM", GEN, TXT, ANY, L("minicpm"), NONE, NONE, NONE, M_T, "text"},
    {"minicpm3", "MiniCPM 3", "MiniCPM", GEN, TXT, ANY, L("minicpm3"), NONE, NONE, NONE, M_T, "text"},
    {"stablelm", "StableLM", "StableLM", GEN, TXT, ANY, L("stablelm"), NONE, NONE, NONE, M_T, "text"},
    {"solar_open", "Solar Open", "Solar", GEN, TXT, ANY, L("solar_open"), NONE, NONE, NONE, M_T, "text"},
    {"mimo", "MiMo", "MiMo", GEN, TXT, ANY, L("mimo"), NONE, NONE, NONE, M_T, "text"},
    {"step3p5", "Step 3.5", "Step", GEN, TXT, ANY, L("step3p5"), NONE, NONE, NONE, M_T, "text"},
    {"gpt2", "GPT-2", "GPT", GEN, TXT, ANY, L("gpt2"), NONE, NONE, NONE, M_T, "text"},
    {"gpt_bigcode", "GPT-BigCode (multi-query attention)", "GPT", GEN, TXT, ANY, L("gpt_bigcode"), NONE, NONE, NONE, M_T, "text"},
    {"gpt_neox", "GPT-NeoX", "GPT", GEN, TXT, ANY, L("gpt_neox"), NONE, NONE, NONE, M_T, "text"},
    {"helium", "Helium", "Kyutai", GEN, TXT, ANY, L("helium"), NONE, NONE, NONE, M_T, "text"},
    {"openelm", "OpenELM", "Apple", GEN, TXT, ANY, L("openelm"), NONE, NONE, NONE, M_T, "text"},
    {"telechat3", "TeleChat3", "TeleAI", GEN, TXT, ANY, L("telechat3"), NONE, NONE, NONE, M_T, "text"},
    {"granite", "Granite", "IBM", GEN, TXT, ANY, L("granite", "granitemoe"), NONE, NONE, NONE, M_T, "text"},
    {"apertus", "Apertus", "Swiss AI", GEN, TXT, ANY, L("apertus"), NONE, NONE, NONE, M_T, "text"},
    {"seed_oss", "Seed-OSS", "ByteDance", GEN, TXT, ANY, L("seed_oss"), NONE, NONE, NONE, M_T, "text"},
    {"bitnet", "BitNet b1.58 (ternary weights)", "BitNet", GEN, TXT, ANY, L("bitnet"), NONE, NONE, NONE, M_T, "text"},
    {"nanochat", "nanochat d20 / d32", "nanochat", GEN, TXT, ANY, L("nanochat"), NONE, NONE, NONE, M_T, "text"},

    /* ---- Mixture-of-Experts (MoE) Models ---- */
    {"mixtral", "Mixtral 8x7B / 8x22B (MoE)", "Mixtral", GEN, TXT, ANY, L("mixtral"), NONE, NONE, NONE, M_T, "text"},
    {"qwen2_moe", "Qwen 2 MoE", "Qwen", GEN, TXT, ANY, L("qwen2_moe"), NONE, NONE, NONE, M_T, "text"},
    {"qwen3_moe", "Qwen 3 MoE", "Qwen", GEN, TXT, ANY, L("qwen3_moe"), NONE, NONE, NONE, M_T, "text"},
    {"qwen3_5_moe", "Qwen 3.5 MoE (MoE + GatedDeltaNet)", "Qwen", GEN, TXT, ANY, L("qwen3_5_moe", "qwen3_5_moe_text"), NONE, NONE, NONE, M_T, "text"},
    {"gpt_oss", "GPT-OSS (MoE)", "GPT-OSS", GEN, TXT, ANY, L("gpt_oss"), NONE, NONE, NONE, M_T, "text"},
    {"minimax", "MiniMax (MoE)", "MiniMax", GEN, TXT, ANY, L("minimax"), NONE, NONE, NONE, M_T, "text"},
    {"olmoe", "OLMoE", "OLMoE", GEN, TXT, ANY, L("olmoe"), NONE, NONE, NONE, M_T, "text"},
    {"phimoe", "Phi MoE", "Phi", GEN, TXT, ANY, L("phimoe"), NONE, NONE, NONE, M_T, "text"},
    {"glm4_moe", "GLM 4 MoE", "GLM", GEN, TXT, ANY, L("glm4_moe"), NONE, NONE, NONE, M_T, "text"},
    {"glm4_moe_lite", "GLM 4 MoE Lite", "GLM", GEN, TXT, ANY, L("glm4_moe_lite"), NONE, L("GLM-4.7-Flash"), NONE, M_T, "text"},
    {"glm_moe_dsa", "GLM MoE DSA (dual-sparse attention)", "GLM", GEN, TXT, ANY, L("glm_moe_dsa"), NONE, NONE, NONE, M_T, "text"},
    {"ernie4_5_moe", "ERNIE 4.5 MoE", "ERNIE", GEN, TXT, ANY, L("ernie4_5_moe", "ernie4.5_moe"), NONE, NONE, NONE, M_T, "text"},
    {"hunyuan_moe", "Hunyuan MoE", "Hunyuan", GEN, TXT, MOE, L("hunyuan", "hunyuan_v1_moe"), NONE, NONE, NONE, M_T, "text"},
    {"exaone_moe", "ExaOne MoE", "ExaOne", GEN, TXT, ANY, L("exaone_moe"), NONE, NONE, NONE, M_T, "text"},
    {"mellum", "Mellum / Mellum 2 (MoE)", "Mellum", GEN, TXT, ANY, L("mellum"), NONE, NONE, NONE, M_T, "text"},
    {"llada2_moe", "LLaDA-2 MoE (masked diffusion)", "LLaDA-2", GEN, TXT, ANY, L("llada2_moe"), NONE, NONE, NONE, M_T, "text"},
    {"cohere2_moe", "Command MoE", "Cohere", GEN, TXT, ANY, L("cohere2_moe"), NONE, NONE, NONE, M_T, "text"},
    {"dbrx", "DBRX (MoE)", "Databricks", GEN, TXT, ANY, L("dbrx"), NONE, NONE, NONE, M_T, "text"},
    {"dots1", "dots.llm1 (MoE)", "Dots", GEN, TXT, ANY, L("dots1"), NONE, NONE, NONE, M_T, "text"},
    {"bailing_moe", "Ling / Bailing MoE", "Ant Group", GEN, TXT, ANY, L("bailing_moe"), NONE, L("Ling"), NONE, M_T, "text"},
    {"afmoe", "AFMoE", "Arcee", GEN, TXT, ANY, L("afmoe"), NONE, NONE, NONE, M_T, "text"},
    {"klear", "Klear (MoE)", "Kuaishou", GEN, TXT, ANY, L("klear"), NONE, NONE, NONE, M_T, "text"},
    {"minimax_m3", "MiniMax-M3 (hybrid dense/MoE)", "MiniMax", GEN, TXT, ANY, L("minimax_m3"), NONE, NONE, NONE, M_T, "text"},
    {"laguna", "Laguna XS 2.1 / XS.2 / S 2.1 (MoE)", "Poolside", GEN, TXT, ANY, L("laguna"), NONE, NONE, NONE, M_T, "text"},
    {"phixtral", "Phixtral (MoE on Phi-2)", "Phi", GEN, TXT, MOE, L("phi-msft"), NONE, NONE, NONE, M_T, "text"},
    {"mimo_v2_flash", "MiMo v2 Flash (MoE)", "MiMo", GEN, TXT, ANY, L("mimo_v2_flash"), NONE, NONE, NONE, M_T, "text"},

    /* ---- SSM and RNN Models ---- */
    {"mamba", "Mamba 1", "Mamba", GEN, TXT, ANY, L("mamba", "falcon_mamba"), NONE, L("Falcon Mamba"), NONE, M_T, "text"},
    {"mamba2", "Mamba 2", "Mamba", GEN, TXT, ANY, L("mamba2"), NONE, NONE, NONE, M_T, "text"},
    {"rwkv7", "RWKV 7", "RWKV", GEN, TXT, ANY, L("rwkv7"), NONE, NONE, NONE, M_T, "text"},
    {"recurrent_gemma", "RecurrentGemma (Griffin)", "RecurrentGemma", GEN, TXT, ANY, L("recurrent_gemma", "griffin"), NONE, L("Griffin"), NONE, M_T, "text"},

    /* ---- Hybrid Models ---- */
    {"jamba", "Jamba (Transformer + Mamba)", "Jamba", GEN, TXT, ANY, L("jamba"), NONE, L("AI21 Jamba-Reasoning"), NONE, M_T, "text"},
    {"nemotron_h", "Nemotron-H (Transformer + SSM)", "Nemotron", GEN, TXT, ANY, L("nemotron_h"), NONE, NONE, NONE, M_T, "text"},
    {"nemotron_nas", "Nemotron-NAS", "Nemotron", GEN, TXT, ANY, L("nemotron-nas"), NONE, NONE, NONE, M_T, "text"},
    {"qwen3_next", "Qwen 3 Next (Transformer + GatedDeltaNet)", "Qwen", GEN, TXT, ANY, L("qwen3_next", "qwen3next"), NONE, NONE, NONE, M_T, "text"},
    {"bailing_moe_linear", "Ling / Ring linear-attention MoE", "Ant Group", GEN, TXT, ANY, L("bailing_moe_linear"), NONE, L("Ring"), NONE, M_T, "text"},
    {"kimi_linear", "Kimi-Linear", "Kimi", GEN, TXT, ANY, L("kimi_linear"), NONE, NONE, NONE, M_T, "text"},
    {"kimi_k3", "Kimi K3", "Kimi", GEN, TXT, ANY, L("kimi_k3"), NONE, NONE, NONE, M_T, "text"},
    {"longcat_flash", "Longcat Flash", "Longcat", GEN, TXT, ANY, L("longcat_flash"), NONE, NONE, NONE, M_T, "text"},
    {"longcat_flash_ngram", "Longcat Flash Ngram", "Longcat", GEN, TXT, ANY, L("longcat_flash_ngram"), NONE, NONE, NONE, M_T, "text"},
    {"falcon_h1", "Falcon-H1 (Mamba2 + attention)", "Falcon", GEN, TXT, ANY, L("falcon_h1"), NONE, NONE, NONE, M_T, "text"},
    {"lfm2", "LFM2 (convolution + attention)", "Liquid AI", GEN, TXT, ANY, L("lfm2"), NONE, NONE, NONE, M_T, "text"},
    {"lfm2_moe", "LFM2-MoE", "Liquid AI", GEN, TXT, ANY, L("lfm2_moe"), NONE, NONE, NONE, M_T, "text"},
    {"plamo2", "PLaMo 2 (Mamba + attention)", "Preferred Networks", GEN, TXT, ANY, L("plamo2"), NONE, NONE, NONE, M_T, "text"},
    {"granitemoehybrid", "Granite 4 (Mamba2 + attention)", "IBM", GEN, TXT, ANY, L("granitemoehybrid"), NONE, NONE, NONE, M_T, "text"},

    /* ---- Vision-Language Models (VLM) ---- */
    {"gemma3_vlm", "Gemma 3 Vision (SigLIP 2)", "Gemma", GEN, VLM, VIS, L("gemma3"), NONE, NONE, NONE, M_TI, "text"},
    {"gemma3n_vlm", "Gemma 3n Vision (MobileNetV5)", "Gemma", GEN, VLM, VIS, L("gemma3n"), NONE, NONE, NONE, M_TI, "text"},
    {"gemma4_vlm", "Gemma 4 Vision", "Gemma", GEN, VLM, VIS, L("gemma4"), NONE, NONE, NONE, M_TI, "text"},
    {"gemma4_unified", "Gemma 4 Unified (text + vision + audio)", "Gemma", GEN, MMD, ANY, L("gemma4_unified"), NONE, NONE, NONE, M_TIVA, "text"},
    {"llama4_vlm", "Llama 4 Scout / Maverick Vision", "Llama", GEN, VLM, VIS, L("llama4"), NONE, NONE, NONE, M_TI, "text"},
    {"qwen2_vl", "Qwen2-VL", "Qwen", GEN, VLM, ANY, L("qwen2_vl"), NONE, NONE, NONE, M_TIV, "text"},
    {"qwen2_5_vl", "Qwen2.5-VL", "Qwen", GEN, VLM, ANY, L("qwen2_5_vl"), NONE, NONE, NONE, M_TIV, "text"},
    {"qwen3_vl", "Qwen3-VL", "Qwen", GEN, VLM, ANY, L("qwen3_vl"), NONE, NONE, NONE, M_TIV, "text"},
    {"qwen3_vl_moe", "Qwen3-VL-MoE", "Qwen", GEN, VLM, ANY, L("qwen3_vl_moe"), NONE, NONE, NONE, M_TIV, "text"},
    {"qwen3_5_vlm", "Qwen 3.5 VLM", "Qwen", GEN, VLM, VIS, L("qwen3_5"), NONE, NONE, NONE, M_TIV, "text"},
    {"qwen3_5_moe_vlm", "Qwen 3.5 MoE VLM", "Qwen", GEN, VLM, VIS, L("qwen3_5_moe"), NONE, NONE, NONE, M_TIV, "text"},
    {"mimo_v2", "MiMo-V2 / V2.5 / V2.6", "MiMo", GEN, VLM, ANY, L("mimo_v2"), NONE, NONE, NONE, M_TIV, "text"},
    {"qwen4_exp", "Qwen3.8-Flash-Next (Qwen4-Exp)", "Qwen", GEN, VLM, ANY, L("qwen4_exp"), NONE, L("Qwen4-Exp"), NONE, M_TIV, "text"},
    {"cohere_compass", "Cohere Compass (North-Micro-Vision)", "Cohere", GEN, VLM, ANY, L("cohere_compass"), NONE, L("North-Micro-Vision"), NONE, M_TI, "text"},
    {"youtu_vl", "Youtu-VL", "Youtu", GEN, VLM, ANY, L("youtu_vl"), NONE, NONE, NONE, M_TI, "text"},
    {"internvl_chat", "InternVL Chat", "Other VLM", GEN, VLM, ANY, L("internvl_chat", "internvl"), NONE, NONE, NONE, M_TI, "text"},
    {"llmjpvl", "LLM-jp-4 VL / Jagle-VL", "Other VLM", GEN, VLM, ANY, L("llmjpvl"), NONE, L("Jagle-VL"), NONE, M_TI, "text"},
    {"llava", "LLaVA / LLaVA-Next", "Other VLM", GEN, VLM, ANY, L("llava", "llava_next"), NONE, L("LLaVA-Next"), NONE, M_TI, "text"},
    {"llava_bunny", "LLaVA-Bunny", "Other VLM", GEN, VLM, ANY, L("llava_bunny", "bunny-llama", "llava-qwen2"), NONE, NONE, NONE, M_TI, "text"},
    {"aya_vision", "Aya Vision", "Cohere", GEN, VLM, ANY, L("aya_vision"), NONE, NONE, NONE, M_TI, "text"},
    {"paligemma", "PaliGemma 1/2", "Gemma", GEN, VLM, ANY, L("paligemma"), NONE, NONE, NONE, M_TI, "text"},
    {"pixtral", "Pixtral", "Mistral", GEN, VLM, ANY, L("pixtral"), NONE, NONE, NONE, M_TI, "text"},
    {"mistral3_vlm", "Mistral 3 Vision", "Mistral", GEN, VLM, VIS, L("mistral3"), NONE, NONE, NONE, M_TI, "text"},
    {"phi3_v", "Phi 3.5 Vision", "Phi", GEN, VLM, ANY, L("phi3_v"), NONE, NONE, NONE, M_TI, "text"},
    {"phi4mm", "Phi 4 Multimodal (image only)", "Phi", GEN, VLM, ANY, L("phi4mm"), NONE, NONE, NONE, M_TI, "text"},
    {"phi4_siglip", "Phi 4 Reasoning Vision", "Phi", GEN, VLM, ANY, L("phi4-siglip"), NONE, NONE, NONE, M_TI, "text"},
    {"molmo", "Molmo v1", "Other VLM", GEN, VLM, ANY, L("molmo"), NONE, NONE, NONE, M_TI, "text"},
    {"molmo2", "Molmo2", "Other VLM", GEN, VLM, ANY, L("molmo2"), NONE, NONE, NONE, M_TI, "text"},
    {"molmo_point", "Molmo-Point (point prediction)", "Other VLM", GEN, VLM, ANY, L("molmo_point"), NONE, NONE, NONE, M_TI, "text"},
    {"minicpmo", "MiniCPM-o", "MiniCPM", GEN, VLM, ANY, L("minicpmo"), NONE, NONE, NONE, M_TI, "text"},
    {"minicpmv4_6", "MiniCPM-V 4.6", "MiniCPM", GEN, VLM, ANY, L("minicpmv4_6"), NONE, NONE, NONE, M_TI, "text"},
    {"moondream3", "Moondream3", "Other VLM", GEN, VLM, ANY, L("moondream3"), NONE, NONE, NONE, M_TI, "text"},
    {"moondream2", "Moondream2", "Other VLM", GEN, VLM, ANY, L("moondream2", "moondream1"), NONE, NONE, NONE, M_TI, "text"},
    {"nemotron_h_nano_omni", "Nemotron H Nano Omni", "Nemotron", GEN, VLM, ANY, L("nemotron_h_nano_omni", "nemotronh_nano_omni_reasoning_v3"), NONE, NONE, NONE, M_TIA, "text"},
    {"mllama", "Llama 3.2 Vision (mllama)", "Llama", GEN, VLM, ANY, L("mllama"), NONE, NONE, NONE, M_TI, "text"},
    {"glm4v", "GLM-4V", "GLM", GEN, VLM, ANY, L("glm4v"), NONE, NONE, NONE, M_TI, "text"},
    {"glm4v_moe", "GLM-4V MoE (GLM-4.5V class)", "GLM", GEN, VLM, ANY, L("glm4v_moe"), NONE, NONE, NONE, M_TI, "text"},
    {"glm_ocr", "GLM-OCR", "GLM", GEN, VLM, ANY, L("glm_ocr"), NONE, NONE, NONE, M_TI, "text"},
    {"smolvlm", "SmolVLM / SmolVLM2 / Idefics3", "Other VLM", GEN, VLM, ANY, L("smolvlm", "smolvlm2", "idefics3"), NONE, NONE, NONE, M_TI, "text"},
    {"idefics2", "Idefics2", "Other VLM", GEN, VLM, ANY, L("idefics2"), NONE, NONE, NONE, M_TI, "text"},
    {"paddleocr_vl", "PaddleOCR-VL", "ERNIE", GEN, VLM, ANY, L("paddleocr_vl"), NONE, NONE, NONE, M_TI, "text"},
    {"dots_ocr", "dots.ocr", "Other VLM", GEN, VLM, ANY, L("dots_ocr"), NONE, NONE, NONE, M_TI, "text"},
    {"kimi_vl", "Kimi-VL / Kimi-VL 2.5", "Kimi", GEN, VLM, ANY, L("kimi_vl", "kimi_k25"), NONE, NONE, NONE, M_TIV, "text"},
    {"kimi_k3_vlm", "Kimi K3 VLM", "Kimi", GEN, VLM, VIS, L("kimi_k3"), NONE, NONE, NONE, M_TIV, "text"},
    {"lfm2_vl", "LFM2-VL", "Liquid AI", GEN, VLM, ANY, L("lfm2_vl", "lfm2-vl"), NONE, NONE, NONE, M_TI, "text"},
    {"granite_vision", "Granite Vision", "IBM", GEN, VLM, GRN, L("granite_vision", "llava_next"), NONE, NONE, NONE, M_TI, "text"},
    {"granite4_vision", "Granite 4 Vision", "IBM", GEN, VLM, ANY, L("granite4_vision"), NONE, NONE, NONE, M_TI, "text"},
    {"deepseekocr", "DeepSeek-OCR", "DeepSeek", GEN, VLM, ANY, L("deepseekocr"), NONE, NONE, NONE, M_TI, "text"},
    {"deepseekocr_2", "DeepSeek-OCR 2", "DeepSeek", GEN, VLM, ANY, L("deepseekocr_2"), NONE, NONE, NONE, M_TI, "text"},
    {"got_ocr2", "GOT-OCR 2.0", "Other VLM", GEN, VLM, ANY, L("got"), NONE, L("GOT-OCR2_0"), NONE, M_TI, "text"},
    {"deepseek_vl_v2", "DeepSeek-VL2", "DeepSeek", GEN, VLM, ANY, L("deepseek_vl_v2", "deepseek_vl2"), NONE, NONE, NONE, M_TI, "text"},
    {"fastvlm", "FastVLM", "Other VLM", GEN, VLM, ANY, L("fastvlm", "llava_qwen2"), NONE, NONE, NONE, M_TI, "text"},
    {"ernie4_5_moe_vl", "ERNIE-4.5 MoE VL", "ERNIE", GEN, VLM, ANY, L("ernie4_5_moe_vl", "ernie4.5_moe_vl"), NONE, NONE, NONE, M_TI, "text"},
    {"hunyuan_vl", "Hunyuan-VL", "Hunyuan", GEN, VLM, ANY, L("hunyuan_vl"), NONE, L("HunyuanOCR"), NONE, M_TI, "text"},
    {"qwen3_omni_moe", "Qwen3-Omni MoE (thinker + talker)", "Qwen", GEN, VLM, ANY, L("qwen3_omni_moe"), NONE, L("Qwen3-Omni"), NONE, M_TIVA, "text"},
    {"minimax_m3_vl", "MiniMax-M3-VL", "MiniMax", GEN, VLM, VIS, L("minimax_m3_vl", "minimax_m3"), NONE, NONE, NONE, M_TI, "text"},
    {"unlimited_ocr", "Unlimited-OCR", "Other VLM", GEN, VLM, ANY, L("unlimited_ocr", "unlimited-ocr"), NONE, NONE, NONE, M_TI, "text"},
    {"florence2", "Florence-2 (DaViT + BART seq2seq, task prompts)", "Other VLM", S2S, MMD, ANY, L("florence2"), NONE, NONE, NONE, M_TI, "text"},
    {"locateanything", "LocateAnything (generative grounding)", "Other VLM", GEN, VLM, ANY, L("locateanything"), NONE, NONE, NONE, M_TI, "text"},
    {"falcon_ocr", "Falcon-OCR (early fusion)", "Other VLM", GEN, MMD, ANY, L("falcon_ocr"), NONE, NONE, NONE, M_TI, "text"},
    {"jvlm", "Jina VLM", "Other VLM", GEN, VLM, ANY, L("jvlm", "jina_vlm"), NONE, L("jina-vlm"), NONE, M_TI, "text"},
    {"muse_glimmer", "Meta Muse Glimmer", "Other VLM", GEN, VLM, ANY, L("muse_glimmer"), NONE, NONE, NONE, M_TI, "text"},
    {"step3p7", "Step-3.7", "Step", GEN, VLM, ANY, L("step3p7"), NONE, NONE, NONE, M_TI, "text"},
    {"mage_vl", "Mage-VL (image only)", "Other VLM", GEN, VLM, ANY, L("mage_vl"), L("MageVLForConditionalGeneration"), NONE, NONE, M_TI, "text"},
    {"inkling", "Inkling (text) / Inkling VLM", "Other VLM", GEN, VLM, ANY, L("inkling_mm_model", "inkling"), NONE, NONE, NONE, M_TIVA, "text"},
    {"nemotron_parse", "Nemotron-Parse (C-RADIO + mBART seq2seq)", "Nemotron", S2S, MMD, ANY, L("nemotron_parse"), NONE, NONE, NONE, M_TI, "text"},

    /* ---- Audio Models ---- */
    {"whisper", "Whisper (encoder-decoder ASR)", "Speech-to-text", STT, TXT, ANY, L("whisper"), NONE, NONE, NONE, M_A, "text"},
    /* Kokoro's config.json declares no model_type; detect.c recognizes its `istftnet` block or
     * kokoro-v1_0.safetensors instead. */
    {"kokoro", "Kokoro (StyleTTS2 + iSTFTNet)", "Text-to-speech", TTS, TXT, ANY, NONE, NONE, L("Kokoro-82M"), NONE, M_T, "audio"},
    {"nemotron_voicechat", "Nemotron VoiceChat (full-duplex speech-to-speech)", "Speech-to-speech", STS, TXT, ANY, L("nemotron_voicechat"), NONE, NONE, NONE, M_A, "audio"},

    /* ---- Regional and Specialized Models ---- */
    {"baichuan_m1", "Baichuan M1", "Baichuan", GEN, TXT, ANY, L("baichuan_m1"), NONE, NONE, NONE, M_T, "text"},
    {"glm4", "GLM 4", "GLM", GEN, TXT, ANY, L("glm4", "glm"), NONE, NONE, NONE, M_T, "text"},
    {"ernie4_5", "ERNIE 4.5", "ERNIE", GEN, TXT, ANY, L("ernie4_5", "ernie4.5"), NONE, NONE, NONE, M_T, "text"},
    /* Covers both the "Hunyuan Dense" row and the "Hunyuan (auto)" row (hunyuan with
     * num_experts == 1 is the same dense runtime). */
    {"hunyuan_dense", "Hunyuan Dense (v1)", "Hunyuan", GEN, TXT, DNS, L("hunyuan_v1_dense", "hunyuan_dense", "hunyuan"), NONE, NONE, NONE, M_T, "text"},
    {"exaone", "ExaOne", "ExaOne", GEN, TXT, ANY, L("exaone"), NONE, NONE, NONE, M_T, "text"},
    {"exaone4", "ExaOne 4", "ExaOne", GEN, TXT, ANY, L("exaone4"), NONE, NONE, NONE, M_T, "text"},

    /* ---- Embedding Models ----
     * Class names in `architectures` are the embedding heads/layouts we know of for each row's
     * "known embedding architecture" (EmbeddingGemma ships Gemma3TextModel, Qwen3-Embedding
     * base-model exports Qwen3Model). */
    {"bert_embedding", "BERT / MiniLM encoder", "Embedding", EMB, TXT, ANY, L("bert"), NONE, L("MiniLM", "multilingual-e5"), NONE, M_T, "embedding"},
    {"xlm_roberta_embedding", "XLM-RoBERTa encoder", "Embedding", EMB, TXT, ANY, L("xlm-roberta"), NONE, L("bge-m3"), NONE, M_T, "embedding"},
    {"modernbert_embedding", "ModernBERT encoder", "Embedding", EMB, TXT, ANY, L("modernbert"), NONE, NONE, NONE, M_T, "embedding"},
    {"siglip_text", "SigLIP text tower", "Embedding", EMB, TXT, ANY, L("siglip"), NONE, NONE, NONE, M_T, "embedding"},
    {"embeddinggemma", "EmbeddingGemma", "Embedding", EMB, TXT, ANY, L("gemma3_text", "gemma3"), L("Gemma3TextModel"), NONE, NONE, M_T, "embedding"},
    {"qwen3_embedding", "Qwen3-Embedding", "Embedding", EMB, TXT, ANY, L("qwen3"), L("Qwen3Model"), NONE, NONE, M_T, "embedding"},
    {"llama_bidirectional", "Bidirectional Llama / LLM2Vec", "Embedding", EMB, TXT, ANY, L("llama_bidirec"), L("LlamaBidirectionalModel"), L("LLM2Vec", "llama-nemotron-embed"), NONE, M_T, "embedding"},
    {"nemotron3_embed", "Nemotron-3-Embed (non-causal Ministral 3)", "Embedding", EMB, TXT, ANY, L("ministral3"), NONE, NONE, NONE, M_T, "embedding"},
    {"lfm2_embedding", "LFM2.5-Embedding", "Embedding", EMB, TXT, ANY, L("lfm2"), L("Lfm2BidirectionalModel"), NONE, NONE, M_T, "embedding"},
    {"qwen3_vl_embedding", "Qwen3-VL-Embedding", "Embedding", EMB, VLM, ANY, L("qwen3_vl"), L("Qwen3VLForEmbedding"), NONE, NONE, M_TI, "embedding"},
    {"llama_nemotron_vl_embed", "Llama-Nemotron-VL-Embed", "Embedding", EMB, VLM, ANY, L("llama_nemotron_vl"), NONE, NONE, NONE, M_TI, "embedding"},
    {"embedding_gemma2", "EmbeddingGemma 2", "Embedding", EMB, VLM, ANY, L("embedding_gemma2", "embedding_gemma2_text"), L("EmbeddingGemma2Model"), NONE, NONE, M_TI, "embedding"},
    {"colidefics3", "ColIdefics3 (late interaction)", "Embedding", EMB, VLM, ANY, L("idefics3"), L("ColIdefics3"), L("ColSmolVLM"), NONE, M_TI, "token_embeddings"},
    {"colqwen2_5", "ColQwen2.5 (late interaction)", "Embedding", EMB, VLM, ANY, L("qwen2_5_vl", "colqwen2"), L("ColQwen2ForRetrieval", "ColQwen2_5", "ColQwen2"), NONE, NONE, M_TI, "token_embeddings"},

    /* ---- Reranker Models ---- */
    {"bert_cross_encoder", "BERT cross-encoder", "Reranker", RRK, TXT, ANY, L("bert"), L("BertForSequenceClassification"), L("ms-marco-MiniLM"), NONE, M_T, "score"},
    {"xlm_roberta_cross_encoder", "XLM-RoBERTa cross-encoder", "Reranker", RRK, TXT, ANY, L("xlm-roberta"), L("XLMRobertaForSequenceClassification"), L("bge-reranker-v2-m3"), NONE, M_T, "score"},
    {"modernbert_cross_encoder", "ModernBERT cross-encoder", "Reranker", RRK, TXT, ANY, L("modernbert"), L("ModernBertForSequenceClassification"), NONE, NONE, M_T, "score"},
    /* Generative rerankers: ordinary generation configs, selected only by --reranker-model. */
    {"qwen3_reranker", "Qwen3 generative reranker (--reranker-model)", "Reranker", RRK, TXT, ANY, L("qwen3"), NONE, NONE, NONE, M_T, "score"},
    {"qwen3_vl_reranker", "Qwen3-VL multimodal reranker (--reranker-model)", "Reranker", RRK, VLM, ANY, L("qwen3_vl"), NONE, NONE, NONE, M_TI, "score"},

    /* ---- Object Detection Models (and the detect surface of the dense-prediction table) ----
     * Families whose model_type the spec does not name have no keys here. */
    {"rt_detr_v2", "RT-DETRv2 (Docling layout)", "Object detection", DET, TXT, ANY, L("rt_detr_v2"), L("RTDetrV2ForObjectDetection"), L("docling-layout-heron"), NONE, M_I, "boxes"},
    {"yolo11", "YOLO11 (OmniParser v2 icon detect)", "Object detection", DET, TXT, ANY, L("yolo11"), NONE, L("OmniParser-v2-icon-detect"), NONE, M_I, "boxes"},
    {"pp_doclayout_v3", "PP-DocLayoutV3", "Object detection", DET, TXT, ANY, NONE, NONE, NONE, NONE, M_I, "boxes"},
    {"rf_detr", "RF-DETR Base / Seg Small (instance masks)", "Object detection", DET, TXT, ANY, NONE, NONE, NONE, NONE, M_I, "boxes"},

    /* ---- Dense Prediction and Token-Level Models ---- */
    {"dinov2", "DINOv2", "Dense prediction", PRD, TXT, ANY, L("dinov2"), NONE, NONE, NONE, M_I, "prediction"},
    {"sapiens2", "Sapiens2", "Dense prediction", PRD, TXT, ANY, NONE, NONE, NONE, NONE, M_I, "prediction"},
    {"sam3", "SAM 3 / SAM 3.1", "Dense prediction", PRD, TXT, ANY, NONE, NONE, NONE, NONE, M_IV, "prediction"},
    {"video_depth_anything", "Video Depth Anything", "Dense prediction", PRD, TXT, ANY, NONE, NONE, NONE, NONE, M_IV, "prediction"},
    {"moge3", "MoGe3", "Dense prediction", PRD, TXT, ANY, NONE, NONE, NONE, NONE, M_I, "prediction"},
    {"sam3d_objects", "SAM 3D Objects", "Dense prediction", PRD, TXT, ANY, NONE, NONE, NONE, NONE, M_I, "prediction"},
    {"sam3d_body", "SAM 3D Body", "Dense prediction", PRD, TXT, ANY, NONE, NONE, NONE, NONE, M_I, "prediction"},
    {"token_classifier", "BERT / XLM-RoBERTa token classifier", "Token classification", TAG, TXT, ANY, L("bert", "xlm-roberta"), L("BertForTokenClassification", "XLMRobertaForTokenClassification"), NONE, NONE, M_T, "labels"},
    {"openai_privacy_filter", "OpenAI Privacy Filter", "Token classification", TAG, TXT, ANY, NONE, NONE, NONE, NONE, M_T, "labels"},
    {"gliner2_5", "GLiNER2.5 (span extraction)", "Token classification", EXT, TXT, ANY, NONE, NONE, L("GLiNER"), NONE, M_T, "spans"},

    /* ---- Image generation (prose of the dense-prediction section) ---- */
    {"flux2", "FLUX.2 Klein", "Image generation", IMG, TXT, ANY, L("flux2"), NONE, NONE, NONE, M_T, "image"},
    {"z_image", "Z-Image", "Image generation", IMG, TXT, ANY, L("z_image"), NONE, NONE, NONE, M_T, "image"},
    {"bonsai", "Prism Bonsai (ternary FLUX.2 Klein)", "Image generation", IMG, TXT, ANY, L("bonsai"), NONE, NONE, NONE, M_T, "image"},
    {"ernie_image", "ERNIE-Image", "Image generation", IMG, TXT, ANY, L("ernie_image"), NONE, NONE, NONE, M_T, "image"},
    {"mage_flow", "Mage-Flow", "Image generation", IMG, TXT, ANY, L("mage_flow"), NONE, NONE, NONE, M_T, "image"},
    {"qwen_image", "Qwen-Image-2.1", "Image generation", IMG, TXT, ANY, L("qwen_image"), NONE, NONE, NONE, M_T, "image"},
    {"ideogram4", "Ideogram 4", "Image generation", IMG, TXT, ANY, L("ideogram4"), NONE, NONE, NONE, M_T, "image"},
    {"ming_image", "Ming-Image-0.1-Design", "Image generation", IMG, TXT, ANY, L("ming_image"), NONE, NONE, NONE, M_T, "image"},
    {"llada_image", "LLaDA-Image", "Image generation", IMG, TXT, ANY, L("llada_image"), NONE, NONE, NONE, M_T, "image"},

    /* ---- Page OCR pipeline (prose): layout stage + Qwen3.5 block transcriber ---- */
    {"indic_ocr", "IndicOCR (layout + block transcriber)", "Page OCR", GEN, MMD, ANY, L("indic_ocr"), NONE, NONE, NONE, M_I, "text"},

    /* ---- Code Models ---- */
    {"starcoder2", "StarCoder 2", "StarCoder", GEN, TXT, ANY, L("starcoder2"), NONE, NONE, NONE, M_T, "text"},
    {"iquestloopcoder", "IQuest-Coder V1 Loop", "IQuest", GEN, TXT, ANY, L("iquestloopcoder"), L("IQuestLoopCoderForCausalLM"), NONE, NONE, M_T, "text"},
    {"iquestcoder", "IQuest-Coder V1", "IQuest", GEN, TXT, ANY, L("iquestcoder"), L("IQuestCoderForCausalLM"), NONE, NONE, M_T, "text"},
};
#define N_FAMILIES (sizeof k_families / sizeof k_families[0])

/* ---- What this build runs: derived from the family records ----
 * A registry family runs on the CPU when a decoder family record (decoder_family.h, listed in
 * families.h) names it as its registry_id or in also_runs (partial when the record names gaps),
 * or an encoder family record (encoder.h) lists it. CUDA, parallelism, drafters and extra KV modes
 * are not built yet. */
static mxl_family_support k_support[N_FAMILIES];
static pthread_once_t k_support_once = PTHREAD_ONCE_INIT;
static const mxl_family_support k_not_built = {MXL_BACKEND_PLANNED, MXL_BACKEND_PLANNED, false, false, NONE, NONE};

static void mark(const char *id, mxl_backend_status st) {
    for (size_t i = 0; id && i < N_FAMILIES; i++)
        if (strcmp(k_families[i].id, id) == 0 && k_support[i].cpu != MXL_BACKEND_SUPPORTED) k_support[i].cpu = st;
}

static void derive_support(void) {
    for (size_t i = 0; i < N_FAMILIES; i++) k_support[i] = k_not_built;
    for (size_t i = 0; i < mxl_decoder_family_count(); i++) {
        const mxl_decoder_family *d = mxl_decoder_family_at(i);
        mxl_backend_status st = d->gaps ? MXL_BACKEND_PARTIAL : MXL_BACKEND_SUPPORTED;
        mark(d->registry_id, st);
        for (size_t k = 0; d->also_runs && d->also_runs[k]; k++) mark(d->also_runs[k], st);
    }
    for (size_t i = 0; i < mxl_encoder_family_count(); i++) {
        const mxl_encoder_family *e = mxl_encoder_family_at(i);
        for (size_t k = 0; k < sizeof e->registry_ids / sizeof e->registry_ids[0]; k++) mark(e->registry_ids[k], MXL_BACKEND_SUPPORTED);
    }
}

const char *mxl_task_name(mxl_task task) {
    switch (task) {
    case MXL_TASK_GENERATE: return "generate";
    case MXL_TASK_SEQ2SEQ: return "seq2seq";
    case MXL_TASK_EMBED: return "embed";
    case MXL_TASK_RERANK: return "rerank";
    case MXL_TASK_SPEECH_TO_TEXT: return "speech-to-text";
    case MXL_TASK_TEXT_TO_SPEECH: return "text-to-speech";
    case MXL_TASK_SPEECH_TO_SPEECH: return "speech-to-speech";
    case MXL_TASK_DETECT: return "detect";
    case MXL_TASK_PREDICT: return "predict";
    case MXL_TASK_TAG: return "tag";
    case MXL_TASK_EXTRACT: return "extract";
    case MXL_TASK_IMAGE_GENERATION: return "image-generation";
    case MXL_TASK_COUNT: break;
    }
    return "unknown";
}

const char *mxl_backend_status_name(mxl_backend_status s) {
    switch (s) {
    case MXL_BACKEND_PLANNED: return "planned";
    case MXL_BACKEND_PARTIAL: return "partial";
    case MXL_BACKEND_SUPPORTED: return "supported";
    }
    return "planned";
}

size_t mxl_strlist_len(mxl_strlist list) {
    size_t n = 0;
    if (list)
        while (list[n]) n++;
    return n;
}

bool mxl_strlist_has(mxl_strlist list, const char *s) {
    if (!list || !s) return false;
    for (size_t i = 0; list[i]; i++)
        if (strcasecmp(list[i], s) == 0) return true;
    return false;
}

size_t mxl_registry_count(void) { return N_FAMILIES; }

const mxl_family *mxl_registry_at(size_t i) {
    MXL_ASSERT(i < N_FAMILIES);
    return &k_families[i];
}

const mxl_family *mxl_registry_find_id(const char *id) {
    if (!id) return NULL;
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (strcmp(k_families[i].id, id) == 0) return &k_families[i];
    return NULL;
}

bool mxl_family_has_model_type(const mxl_family *f, const char *model_type) {
    return f && model_type && *model_type && mxl_strlist_has(f->model_types, model_type);
}

const mxl_family *mxl_registry_find_model_type(const char *model_type) {
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (mxl_family_has_model_type(&k_families[i], model_type)) return &k_families[i];
    return NULL;
}

size_t mxl_registry_find_all_model_type(const char *model_type, const mxl_family **out, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < N_FAMILIES; i++) {
        if (!mxl_family_has_model_type(&k_families[i], model_type)) continue;
        if (n < cap) out[n] = &k_families[i];
        n++;
    }
    return n;
}

const mxl_family *mxl_registry_find_architecture(const char *arch) {
    if (!arch) return NULL;
    for (size_t i = 0; i < N_FAMILIES; i++) {
        mxl_strlist a = k_families[i].architectures;
        for (size_t j = 0; a && a[j]; j++)
            if (strcmp(a[j], arch) == 0) return &k_families[i];
    }
    return NULL;
}

mxl_strlist mxl_family_runtimes(const mxl_family *f) {
    static const char *const per_task[MXL_TASK_COUNT][2] = {
        [MXL_TASK_GENERATE] = {"generate", NULL},
        [MXL_TASK_SEQ2SEQ] = {"seq2seq", NULL},
        [MXL_TASK_EMBED] = {"embed", NULL},
        [MXL_TASK_RERANK] = {"rerank", NULL},
        [MXL_TASK_SPEECH_TO_TEXT] = {"speech-to-text", NULL},
        [MXL_TASK_TEXT_TO_SPEECH] = {"text-to-speech", NULL},
        [MXL_TASK_SPEECH_TO_SPEECH] = {"speech-to-speech", NULL},
        [MXL_TASK_DETECT] = {"detect", NULL},
        [MXL_TASK_PREDICT] = {"predict", NULL},
        [MXL_TASK_TAG] = {"tag", NULL},
        [MXL_TASK_EXTRACT] = {"extract", NULL},
        [MXL_TASK_IMAGE_GENERATION] = {"image-generation", NULL},
    };
    if (f->runtimes) return f->runtimes;
    MXL_ASSERT(f->task < MXL_TASK_COUNT);
    return per_task[f->task];
}

const mxl_family_support *mxl_family_support_of(const mxl_family *f) {
    pthread_once(&k_support_once, derive_support);
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (&k_families[i] == f || strcmp(k_families[i].id, f->id) == 0) return &k_support[i];
    return &k_not_built;
}

bool mxl_family_implemented(const mxl_family *f) {
    const mxl_family_support *s = mxl_family_support_of(f);
    return s->cpu != MXL_BACKEND_PLANNED || s->cuda != MXL_BACKEND_PLANNED;
}

static bool is_lower_snake(const char *s) {
    if (!s || !islower((unsigned char)s[0])) return false;
    for (const char *p = s; *p; p++)
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_')) return false;
    return true;
}

mxl_status mxl_registry_validate(mxl_error *err) {
    for (size_t i = 0; i < N_FAMILIES; i++) {
        const mxl_family *f = &k_families[i];
        if (!is_lower_snake(f->id))
            return mxl_error_set(err, MXL_ERR_INTERNAL, "registry: id '%s' is not lower_snake", f->id ? f->id : "(null)");
        if (!f->display_name || !*f->display_name || !f->category || !*f->category || !f->output)
            return mxl_error_set(err, MXL_ERR_INTERNAL, "registry: family '%s' lacks a name, category or output", f->id);
        if (f->task >= MXL_TASK_COUNT)
            return mxl_error_set(err, MXL_ERR_INTERNAL, "registry: family '%s' has an invalid task", f->id);
        if (mxl_strlist_len(f->modalities_in) == 0)
            return mxl_error_set(err, MXL_ERR_INTERNAL, "registry: family '%s' takes no input modality", f->id);
        for (size_t j = 0; j < i; j++)
            if (strcmp(k_families[j].id, f->id) == 0)
                return mxl_error_set(err, MXL_ERR_INTERNAL, "registry: id '%s' appears twice", f->id);
        for (size_t k = 0; f->model_types && f->model_types[k]; k++) {
            const char *mt = f->model_types[k];
            for (const char *p = mt; *p; p++)
                if (isupper((unsigned char)*p) || isspace((unsigned char)*p))
                    return mxl_error_set(err, MXL_ERR_INTERNAL, "registry: family '%s' key '%s' must be lower-case without spaces", f->id, mt);
            for (size_t m = 0; m < k; m++)
                if (strcmp(f->model_types[m], mt) == 0)
                    return mxl_error_set(err, MXL_ERR_INTERNAL, "registry: family '%s' lists key '%s' twice", f->id, mt);
        }
    }
    for (size_t i = 0; i < mxl_decoder_family_count(); i++) {
        const mxl_decoder_family *d = mxl_decoder_family_at(i);
        if (!mxl_registry_find_id(d->registry_id))
            return mxl_error_set(err, MXL_ERR_INTERNAL, "registry: decoder family '%s' names unknown registry family '%s'", d->model_type,
                                 d->registry_id ? d->registry_id : "(null)");
        if (!mxl_family_has_model_type(mxl_registry_find_id(d->registry_id), d->model_type))
            return mxl_error_set(err, MXL_ERR_INTERNAL, "registry: family '%s' does not list model_type '%s' of its decoder record", d->registry_id,
                                 d->model_type);
        for (size_t k = 0; d->also_runs && d->also_runs[k]; k++)
            if (!mxl_registry_find_id(d->also_runs[k]))
                return mxl_error_set(err, MXL_ERR_INTERNAL, "registry: decoder family '%s' names unknown registry family '%s'", d->model_type,
                                     d->also_runs[k]);
    }
    for (size_t i = 0; i < mxl_encoder_family_count(); i++) {
        const mxl_encoder_family *e = mxl_encoder_family_at(i);
        for (size_t k = 0; k < sizeof e->registry_ids / sizeof e->registry_ids[0]; k++)
            if (e->registry_ids[k] && !mxl_registry_find_id(e->registry_ids[k]))
                return mxl_error_set(err, MXL_ERR_INTERNAL, "registry: encoder family '%s' names unknown registry family '%s'", e->model_type,
                                     e->registry_ids[k]);
    }
    return MXL_OK;
}
