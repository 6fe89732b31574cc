/* families.h - THE list of the decoder families this build runs, one line each, in the order
 * lookups try them (the first record claiming a GGUF architecture wins it: llama before the
 * families that share llama.cpp's "llama" converter). Each name N is the record
 * `mxl_family_N` its family file (models/family_*.c) defines; families.c makes the table.
 * Adding a family: its family file and one line here (docs/adding-a-family.md). */
#ifndef MXL_MODELS_FAMILIES_H
#define MXL_MODELS_FAMILIES_H

#define MXL_DECODER_FAMILIES(X) \
    X(llama)                    \
    X(mistral)                  \
    X(llama_bidirec)            \
    X(qwen2)                    \
    X(qwen3)                    \
    X(gemma)                    \
    X(gemma2)                   \
    X(gemma3_text)              \
    X(gemma3)                   \
    X(gemma4_text)              \
    X(gemma4)                   \
    X(gemma3n_text)             \
    X(gemma3n)                  \
    X(paligemma)                \
    X(phi3)                     \
    X(olmo2)                    \
    X(granite)                  \
    X(smollm3)                  \
    X(starcoder2)               \
    X(gpt2)                     \
    X(stablelm)                 \
    X(helium)                   \
    X(seed_oss)                 \
    X(ernie4_5)                 \
    X(internlm3)                \
    X(iquestcoder)              \
    X(glm)                      \
    X(glm4)                     \
    X(olmo3)                    \
    X(hunyuan_v1_dense)         \
    X(exaone4)                  \
    X(exaone)                   \
    X(minicpm)                  \
    X(bitnet)                   \
    X(olmo)                     \
    X(nemotron)                 \
    X(cohere)                   \
    X(cohere2)                  \
    X(phi)                      \
    X(gpt_bigcode)              \
    X(ministral3)               \
    X(apertus)                  \
    X(gpt_neox)                 \
    X(nanochat)                 \
    X(mixtral)                  \
    X(qwen2_moe)                \
    X(qwen3_moe)                \
    X(olmoe)                    \
    X(granitemoe)               \
    X(glm4_moe)                 \
    X(dots1)                    \
    X(ernie4_5_moe)             \
    X(hunyuan_v1_moe)           \
    X(deepseek_v2)              \
    X(deepseek_v3)              \
    X(glm4_moe_lite)            \
    X(mistral4)                 \
    X(youtu)                    \
    X(youtu_llm)                \
    X(minicpm3)                 \
    X(exaone_moe)               \
    X(mellum)                   \
    X(cohere2_moe)              \
    X(llama4_text)              \
    X(gpt_oss)                  \
    X(afmoe)                    \
    X(laguna)                   \
    X(dbrx)                     \
    X(lfm2)                     \
    X(mamba)                    \
    X(falcon_mamba)             \
    X(mamba2)                   \
    X(qwen3_next)               \
    X(qwen3_5_text)             \
    X(qwen3_5_moe_text)         \
    X(qwen3_5)                  \
    X(qwen3_5_moe)              \
    X(lfm2_moe)                 \
    X(granitemoehybrid)         \
    X(nemotron_h)               \
    X(jamba)                    \
    X(falcon_h1)                \
    X(recurrent_gemma)          \
    X(minimax)                  \
    X(kimi_linear)              \
    X(phimoe)                   \
    X(solar_open)               \
    X(mistral3)                 \
    X(llava)                    \
    X(qwen2_vl)                 \
    X(qwen2_5_vl)               \
    X(qwen3_vl)                 \
    X(llava_next)               \
    X(aya_vision)               \
    X(idefics3)                 \
    X(internvl)                 \
    X(smolvlm)

#endif
