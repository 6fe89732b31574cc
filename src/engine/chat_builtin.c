/* chat_builtin.c - llama.cpp's built-in chat formats as Jinja sources (chat_builtin.h).
 *
 * Each entry re-states one branch of llama.cpp's legacy formatter (llm_chat_apply_template in
 * src/llama-chat.cpp) in Jinja, so `--chat-template command-r` renders what llama-server renders.
 * Conventions shared by every template:
 *  - all output goes through {{- ... -}} and every tag strips around itself, so the only text
 *    emitted is the quoted literals and the message fields (whitespace control never touches
 *    rendered values, only template text);
 *  - `c` is the message content, "" when it is null or absent (llama-server's legacy route does
 *    the same; the server has already joined content parts into a string);
 *  - `t` is c trimmed of the bytes C's isspace() accepts (llama.cpp's trim()), not Python's
 *    wider str.strip() set, so \x1c-\x1f, U+00A0 etc. survive as they do in llama.cpp;
 *  - `up(s)` upper-cases ASCII letters only, like std::toupper in the C locale.
 * Formats that ignore add_ass in llama.cpp (llama2, mistral, orion, minicpm, rwkv-world, ...)
 * ignore add_generation_prompt here too. */
#include "engine/chat_builtin.h"

#include <stddef.h>
#include <string.h>

#define TRIM ".strip(' \\t\\n\\v\\f\\r')"
#define FOR                                                                                                    \
    "{%- for m in messages -%}{%- set c = m.content if m.content is string else '' -%}{%- set t = c" TRIM   \
    " -%}{%- set r = m.role -%}"
#define ENDFOR "{%- endfor -%}"
#define OUT(e) "{{- " e " -}}"
#define IF(x) "{%- if " x " -%}"
#define ELIF(x) "{%- elif " x " -%}"
#define ELSE "{%- else -%}"
#define ENDIF "{%- endif -%}"
#define SET(x) "{%- set " x " -%}"
#define GEN(e) IF("add_generation_prompt") OUT(e) ENDIF
#define UP_MACRO                                                                                               \
    "{%- macro up(s) -%}{%- for ch in s -%}{{- ch.upper() if ch in 'abcdefghijklmnopqrstuvwxyz' else ch -}}" \
    "{%- endfor -%}{%- endmacro -%}"
#define HAS_SYSTEM "(messages|length > 0 and messages[0].role == 'system')"

/* "[INST] " opens the first turn; later turns reopen after an assistant message. */
#define LLAMA2(system_out, reopen, x)                                                                           \
    OUT("'[INST] '") SET("ns = namespace(inside=true)") FOR SET("x = " x)                                    \
    IF("not ns.inside") SET("ns.inside = true") OUT(reopen) ENDIF                                            \
    IF("r == 'system'") OUT(system_out) ELIF("r == 'user'") OUT("x ~ ' [/INST]'")                           \
    ELSE OUT("x ~ '</s>'") SET("ns.inside = false") ENDIF ENDFOR

#define LLAMA2_SYS "'<<SYS>>\\n' ~ x ~ '\\n<</SYS>>\\n\\n'"

#define MISTRAL(lead, trail, asst)                                                                             \
    SET("ns = namespace(inside=false)") FOR                                                                  \
    IF("not ns.inside") OUT("'" lead "[INST]" trail "'") SET("ns.inside = true") ENDIF                       \
    IF("r == 'system'") OUT("c ~ '\\n\\n'") ELIF("r == 'user'") OUT("c ~ '" lead "[/INST]'")                 \
    ELSE OUT("'" trail "' ~ " asst " ~ '</s>'") SET("ns.inside = false") ENDIF ENDFOR

#define MISTRAL_V7(sp)                                                                                         \
    FOR IF("r == 'system'") OUT("'[SYSTEM_PROMPT]" sp "' ~ c ~ '[/SYSTEM_PROMPT]'")                          \
    ELIF("r == 'user'") OUT("'[INST]" sp "' ~ c ~ '[/INST]'") ELSE OUT("'" sp "' ~ c ~ '</s>'") ENDIF ENDFOR

#define VICUNA(system_out)                                                                                     \
    FOR IF("r == 'system'") OUT(system_out) ELIF("r == 'user'") OUT("'USER: ' ~ c ~ '\\n'")                  \
    ELIF("r == 'assistant'") OUT("'ASSISTANT: ' ~ c ~ '</s>\\n'") ENDIF ENDFOR GEN("'ASSISTANT:'")

#define EXAONE(open_sys, open_user, open_asst, user_end, turn_end, tool, gen)                                 \
    FOR IF("r == 'system'") OUT("'" open_sys "' ~ t ~ '" turn_end "'")                                       \
    ELIF("r == 'user'") OUT("'" open_user "' ~ t ~ '" user_end "'")                                          \
    ELIF("r == 'assistant'") OUT("'" open_asst "' ~ t ~ '" turn_end "'") tool ENDIF ENDFOR GEN(gen)

#define GRANITE4                                                                                               \
    FOR OUT("('<|start_of_role|>assistant<|end_of_role|><|tool_call|>' if r == 'assistant_tool_call' else "   \
            "'<|start_of_role|>' ~ r ~ '<|end_of_role|>') ~ c ~ '<|end_of_text|>\\n'")                       \
    ENDFOR GEN("'<|start_of_role|>assistant<|end_of_role|>'")

#define BAILING_ROLE "('HUMAN' if r == 'user' else up(r))"
#define BAILING(gen) UP_MACRO FOR OUT("'<role>' ~ " BAILING_ROLE " ~ '</role>' ~ c") ENDFOR GEN(gen)

typedef struct builtin {
    const char *name, *source;
} builtin;

/* llama.cpp's LLM_CHAT_TEMPLATES map, in its (std::map, byte-wise sorted) order. */
static const builtin k_builtins[] = {
    {"bailing", BAILING("'<role>ASSISTANT</role>'")},
    {"bailing-think", BAILING("'<role>ASSISTANT</role><think>'")},
    {"bailing2", UP_MACRO IF("not " HAS_SYSTEM) OUT("'<role>SYSTEM</role>detailed thinking off<|role_end|>'") ENDIF
                     FOR OUT("'<role>' ~ " BAILING_ROLE " ~ '</role>' ~ c ~ '<|role_end|>'") ENDFOR
                         GEN("'<role>ASSISTANT</role>'")},
    {"chatglm3", OUT("'[gMASK]sop'") FOR OUT("'<|' ~ r ~ '|>\\n ' ~ c") ENDFOR GEN("'<|assistant|>'")},
    {"chatglm4", OUT("'[gMASK]<sop>'") FOR OUT("'<|' ~ r ~ '|>\\n' ~ c") ENDFOR GEN("'<|assistant|>\\n'")},
    {"chatml", FOR OUT("'<|im_start|>' ~ r ~ '\\n' ~ c ~ '<|im_end|>\\n'") ENDFOR GEN("'<|im_start|>assistant\\n'")},
    {"command-r",
     FOR IF("r == 'system'") OUT("'<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>' ~ t ~ '<|END_OF_TURN_TOKEN|>'")
         ELIF("r == 'user'") OUT("'<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' ~ t ~ '<|END_OF_TURN_TOKEN|>'")
             ELIF("r == 'assistant'") OUT("'<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' ~ t ~ '<|END_OF_TURN_TOKEN|>'")
                 ENDIF ENDFOR GEN("'<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>'")},
    {"deepseek", FOR IF("r == 'system'") OUT("c") ELIF("r == 'user'") OUT("'### Instruction:\\n' ~ c ~ '\\n'")
                     ELIF("r == 'assistant'") OUT("'### Response:\\n' ~ c ~ '\\n<|EOT|>\\n'") ENDIF ENDFOR
                         GEN("'### Response:\\n'")},
    {"deepseek-ocr", FOR OUT("c") ENDFOR},
    {"deepseek2", FOR IF("r == 'system'") OUT("c ~ '\\n\\n'") ELIF("r == 'user'") OUT("'User: ' ~ c ~ '\\n\\n'")
                      ELIF("r == 'assistant'") OUT("'Assistant: ' ~ c ~ '<｜end▁of▁sentence｜>'") ENDIF ENDFOR
                          GEN("'Assistant:'")},
    {"deepseek3", FOR IF("r == 'system'") OUT("c ~ '\\n\\n'") ELIF("r == 'user'") OUT("'<｜User｜>' ~ c")
                      ELIF("r == 'assistant'") OUT("'<｜Assistant｜>' ~ c ~ '<｜end▁of▁sentence｜>'") ENDIF ENDFOR
                          GEN("'<｜Assistant｜>'")},
    {"exaone-moe", EXAONE("<|system|>\\n", "<|user|>\\n", "<|assistant|>\\n", "<|endofturn|>\\n", "<|endofturn|>\\n",
                          ELIF("r == 'tool'") OUT("'<|tool|>\\n' ~ t ~ '<|endofturn|>\\n'"), "'<|assistant|>\\n'")},
    {"exaone3", EXAONE("[|system|]", "[|user|]", "[|assistant|]", "\\n", "[|endofturn|]\\n", "", "'[|assistant|]'")},
    {"exaone4", EXAONE("[|system|]", "[|user|]", "[|assistant|]", "\\n", "[|endofturn|]\\n",
                       ELIF("r == 'tool'") OUT("'[|tool|]' ~ t ~ '[|endofturn|]\\n'"), "'[|assistant|]'")},
    {"falcon3", FOR OUT("'<|' ~ r ~ '|>\\n' ~ c ~ '\\n'") ENDFOR GEN("'<|assistant|>\\n'")},
    {"gemma", SET("ns = namespace(sys='')") FOR IF("r == 'system'") SET("ns.sys = ns.sys ~ t")
                  ELSE SET("role = 'model' if r == 'assistant' else r") OUT("'<start_of_turn>' ~ role ~ '\\n'")
                      IF("ns.sys and role != 'model'") OUT("ns.sys ~ '\\n\\n'") SET("ns.sys = ''") ENDIF
                          OUT("t ~ '<end_of_turn>\\n'") ENDIF ENDFOR GEN("'<start_of_turn>model\\n'")},
    {"gigachat", SET("sys = " HAS_SYSTEM)
                     IF("sys") OUT("'<s>' ~ (messages[0].content if messages[0].content is string else '') ~ "
                                   "'<|message_sep|>'") ELSE OUT("'<s>'") ENDIF
                         FOR IF("not (loop.first and sys)")
                             IF("r == 'user'") OUT("'user<|role_sep|>' ~ c ~ '<|message_sep|>available functions"
                                                   "<|role_sep|>[]<|message_sep|>'")
                                 ELIF("r == 'assistant'") OUT("'assistant<|role_sep|>' ~ c ~ '<|message_sep|>'")
                                     ENDIF ENDIF ENDFOR GEN("'assistant<|role_sep|>'")},
    {"glmedge", FOR OUT("'<|' ~ r ~ '|>\\n' ~ c") ENDFOR GEN("'<|assistant|>'")},
    {"gpt-oss", FOR OUT("'<|start|>' ~ r ~ '<|message|>' ~ c ~ ('<|return|>' if r == 'assistant' else '<|end|>')")
                    ENDFOR GEN("'<|start|>assistant'")},
    {"granite", FOR OUT("'<|start_of_role|>' ~ r ~ '<|end_of_role|>' ~ ('<|tool_call|>' if r == "
                        "'assistant_tool_call' else '') ~ c ~ '<|end_of_text|>\\n'")
                    ENDFOR GEN("'<|start_of_role|>assistant<|end_of_role|>'")},
    {"granite-4.0", GRANITE4},
    {"granite-4.1", GRANITE4},
    {"grok-2", FOR IF("r == 'system'") OUT("'System: ' ~ t ~ '<|separator|>\\n\\n'")
                   ELIF("r == 'user'") OUT("'Human: ' ~ t ~ '<|separator|>\\n\\n'")
                       ELIF("r == 'assistant'") OUT("'Assistant: ' ~ c ~ '<|separator|>\\n\\n'") ENDIF ENDFOR
                           GEN("'Assistant:'")},
    {"hunyuan-dense", FOR IF("loop.first and r == 'system'") OUT("c ~ '<｜hy_place▁holder▁no▁3｜>'") ENDIF
                          IF("r == 'assistant'") OUT("'<｜hy_Assistant｜>' ~ c ~ '<｜hy_place▁holder▁no▁2｜>'")
                              ELIF("r == 'user'") OUT("'<｜hy_User｜>' ~ c ~ '<｜hy_Assistant｜>'") ENDIF ENDFOR},
    {"hunyuan-moe", FOR IF("r == 'system'") OUT("'<|startoftext|>' ~ c ~ '<|extra_4|>'")
                        ELIF("r == 'assistant'") OUT("c ~ '<|eos|>'") ELSE OUT("'<|startoftext|>' ~ c ~ '<|extra_0|>'")
                            ENDIF ENDFOR},
    {"hunyuan-vl", OUT("'<｜hy_begin▁of▁sentence｜>'") FOR IF("loop.first and r == 'system'")
                       OUT("c ~ '<｜hy_place▁holder▁no▁3｜>'") ELIF("r == 'user'") OUT("c ~ '<｜hy_User｜>'")
                           ELIF("r == 'assistant'") OUT("c ~ '<｜hy_Assistant｜>'") ENDIF ENDFOR},
    {"kimi-k2", FOR IF("r == 'system'") OUT("'<|im_system|>system<|im_middle|>'")
                    ELIF("r == 'user'") OUT("'<|im_user|>user<|im_middle|>'")
                        ELIF("r == 'assistant'") OUT("'<|im_assistant|>assistant<|im_middle|>'")
                            ELIF("r == 'tool'") OUT("'<|im_system|>tool<|im_middle|>'") ENDIF OUT("c ~ '<|im_end|>'")
                                ENDFOR GEN("'<|im_assistant|>assistant<|im_middle|>'")},
    /* llama2 has no system turn: the system text is kept, bare, in the first [INST] */
    {"llama2", LLAMA2("x ~ '\\n'", "'[INST] '", "c")},
    {"llama2-sys", LLAMA2(LLAMA2_SYS, "'[INST] '", "c")},
    {"llama2-sys-bos", LLAMA2(LLAMA2_SYS, "'<s>[INST] '", "c")},
    {"llama2-sys-strip", LLAMA2(LLAMA2_SYS, "'[INST] '", "t")},
    {"llama3", FOR OUT("'<|start_header_id|>' ~ r ~ '<|end_header_id|>\\n\\n' ~ t ~ '<|eot_id|>'") ENDFOR
                   GEN("'<|start_header_id|>assistant<|end_header_id|>\\n\\n'")},
    {"llama4", FOR OUT("'<|header_start|>' ~ r ~ '<|header_end|>\\n\\n' ~ t ~ '<|eot|>'") ENDFOR
                   GEN("'<|header_start|>assistant<|header_end|>\\n\\n'")},
    {"megrez", FOR OUT("'<|role_start|>' ~ r ~ '<|role_end|>' ~ c ~ '<|turn_end|>'") ENDFOR
                   GEN("'<|role_start|>assistant<|role_end|>'")},
    {"minicpm", FOR IF("r == 'user'") OUT("'<用户>' ~ t ~ '<AI>'") ELSE OUT("t") ENDIF ENDFOR},
    {"mistral-v1", MISTRAL(" ", " ", "c")},
    {"mistral-v3", MISTRAL("", " ", "t")},
    {"mistral-v3-tekken", MISTRAL("", "", "c")},
    {"mistral-v7", MISTRAL_V7(" ")},
    {"mistral-v7-tekken", MISTRAL_V7("")},
    {"monarch", FOR OUT("('' if loop.first else '<s>') ~ r ~ '\\n' ~ c ~ '</s>\\n'") ENDFOR GEN("'<s>assistant\\n'")},
    {"openchat", UP_MACRO FOR IF("r == 'system'") OUT("c ~ '<|end_of_turn|>'")
                     ELSE OUT("'GPT4 Correct ' ~ up(r[:1]) ~ r[1:] ~ ': ' ~ c ~ '<|end_of_turn|>'") ENDIF ENDFOR
                         GEN("'GPT4 Correct Assistant:'")},
    {"orion", SET("ns = namespace(sys='')") FOR IF("r == 'system'") SET("ns.sys = ns.sys ~ c")
                  ELIF("r == 'user'") OUT("'Human: '") IF("ns.sys") OUT("ns.sys ~ '\\n\\n'") SET("ns.sys = ''") ENDIF
                      OUT("c ~ '\\n\\nAssistant: </s>'") ELSE OUT("c ~ '</s>'") ENDIF ENDFOR},
    {"pangu-embedded", FOR IF("loop.first and r != 'system'") OUT("'[unused9]系统：[unused10]'") ENDIF
                           IF("r == 'system'") OUT("'[unused9]系统：' ~ c ~ '[unused10]'")
                               ELIF("r == 'user'") OUT("'[unused9]用户：' ~ c ~ '[unused10]'")
                                   ELIF("r == 'assistant'") OUT("'[unused9]助手：' ~ c ~ '[unused10]'")
                                       ELIF("r == 'tool'") OUT("'[unused9]工具：' ~ c ~ '[unused10]'")
                                           ELIF("r == 'function'") OUT("'[unused9]方法：' ~ c ~ '[unused10]'") ENDIF
                                               ENDFOR GEN("'[unused9]助手：'")},
    {"phi3", FOR OUT("'<|' ~ r ~ '|>\\n' ~ c ~ '<|end|>\\n'") ENDFOR GEN("'<|assistant|>\\n'")},
    {"phi4", FOR OUT("'<|im_start|>' ~ r ~ '<|im_sep|>' ~ c ~ '<|im_end|>'") ENDFOR
                 GEN("'<|im_start|>assistant<|im_sep|>'")},
    {"rwkv-world", FOR IF("r == 'system'") OUT("'System: ' ~ t ~ '\\n\\n'")
                       ELIF("r == 'user'") OUT("'User: ' ~ t ~ '\\n\\n'") IF("loop.last") OUT("'Assistant:'") ENDIF
                           ELIF("r == 'assistant'") OUT("'Assistant: ' ~ t ~ '\\n\\n'") ENDIF ENDFOR},
    {"seed_oss", FOR OUT("'<seed:bos>' ~ r ~ '\\n' ~ (t if r == 'assistant' else c) ~ '<seed:eos>'") ENDFOR
                     GEN("'<seed:bos>assistant\\n'")},
    {"smolvlm", OUT("'<|im_start|>'") FOR IF("r == 'system'") OUT("c ~ '\\n\\n'")
                    ELIF("r == 'user'") OUT("'User: ' ~ c ~ '<end_of_utterance>\\n'")
                        ELSE OUT("'Assistant: ' ~ c ~ '<end_of_utterance>\\n'") ENDIF ENDFOR GEN("'Assistant:'")},
    {"solar-open", FOR OUT("'<|begin|>' ~ r ~ '<|content|>' ~ c ~ '<|end|>'") ENDFOR GEN("'<|begin|>assistant'")},
    {"vicuna", VICUNA("c ~ '\\n\\n'")},
    {"vicuna-orca", VICUNA("'SYSTEM: ' ~ c ~ '\\n'")},
    {"yandex", FOR IF("r == 'user'") OUT("' Пользователь: ' ~ c ~ '\\n\\n'")
                   ELIF("r == 'assistant'") OUT("' Ассистент: ' ~ c ~ '\\n\\n'") ENDIF ENDFOR
                       GEN("' Ассистент:[SEP]'")},
    {"zephyr", FOR OUT("'<|' ~ r ~ '|>\\n' ~ c ~ '<|endoftext|>\\n'") ENDFOR GEN("'<|assistant|>\\n'")},
};

#define N_BUILTINS (sizeof k_builtins / sizeof k_builtins[0])

const char *mxl_chat_builtin_template(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < N_BUILTINS; i++)
        if (!strcmp(k_builtins[i].name, name)) return k_builtins[i].source;
    return NULL;
}

const char *mxl_chat_builtin_name(size_t i) { return i < N_BUILTINS ? k_builtins[i].name : NULL; }
