#!/usr/bin/env bash
# trex: MindSpeed-LLM CPT launch for node 0 of 8 (128 ranks). Run this file on node 0; every node runs its own script.
set -euo pipefail

MINDSPEED_LLM_DIR=/path/to/MindSpeed-LLM
NNODES=8
NODE_RANK=0
NPROC_PER_NODE=16
MASTER_ADDR=localhost
MASTER_PORT=6000
DATA_PATH=<RUN_DIR>/mindspeed/cpt/data/cpt_text_document
TOKENIZER_PATH=/path/to/tokenizer
CKPT_LOAD_DIR=<RUN_DIR>/mindspeed/base-megatron
CKPT_SAVE_DIR=<RUN_DIR>/mindspeed/cpt/checkpoints
LOG_DIR=<RUN_DIR>/mindspeed/cpt/logs

# host-side switches (T-Rex: CPU binding, task queue, HCCL all-to-all pipeline, AIV, buffer, tcmalloc)
export CUDA_DEVICE_MAX_CONNECTIONS=1
export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
export HCCL_CONNECT_TIMEOUT=1800
export CPU_AFFINITY_CONF=1
export TASK_QUEUE_ENABLE=2
export HCCL_ALGO='alltoall=level0:NA;level1:pipeline'
export HCCL_OP_EXPANSION_MODE=AIV
export HCCL_BUFFSIZE=256
export LD_PRELOAD=/usr/lib64/libtcmalloc.so${LD_PRELOAD:+:$LD_PRELOAD}

mkdir -p "$LOG_DIR" "$CKPT_SAVE_DIR"
cd "$MINDSPEED_LLM_DIR"

DISTRIBUTED_ARGS=(
    --nproc_per_node $NPROC_PER_NODE
    --nnodes $NNODES
    --node_rank $NODE_RANK
    --master_addr $MASTER_ADDR
    --master_port $MASTER_PORT
)

LAYOUT_ARGS=(
    --tensor-model-parallel-size 1
    --pipeline-model-parallel-size 4
    --expert-model-parallel-size 32
    --expert-tensor-parallel-size 1
    --context-parallel-size 1
    --num-layers 44
    --noop-layers 43
)

MODEL_ARGS=(
    --use-mcore-models
    --spec mindspeed_llm.tasks.models.spec.deepseek_v4_spec layer_spec
    --hidden-size 4096
    --num-attention-heads 64
    --group-query-attention
    --num-query-groups 1
    --kv-channels 512
    --q-lora-rank 1024
    --qk-pos-emb-head-dim 64
    --o-groups 8
    --o-lora-rank 1024
    --sliding-window 128
    --compress-ratios 0,0,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,0
    --index-n-heads 64
    --index-head-dim 128
    --index-topk 512
    --hc-mult 4
    --hc-sinkhorn-iters 20
    --num-hash-layers 3
    --swiglu-limit 10
    --seq-length 4096
    --max-position-embeddings 1048576
    --vocab-size 129280
    --padded-vocab-size 129280
    --make-vocab-size-divisible-by 1
    --untie-embeddings-and-output-weights
    --disable-bias-linear
    --normalization RMSNorm
    --norm-epsilon 1e-06
    --swiglu
    --position-embedding-type rope
    --rotary-base 10000
    --compress-rotary-base 160000
    --rope-scaling-type yarn
    --rope-scaling-factor 16
    --rope-scaling-original-max-position-embeddings 65536
    --rope-scaling-beta-fast 32
    --rope-scaling-beta-slow 1
    --num-experts 256
    --moe-router-topk 6
    --moe-ffn-hidden-size 2048
    --n-shared-experts 1
    --moe-router-score-function sqrtsoftplus
    --moe-router-topk-scaling-factor 1.5
    --norm-topk-prob
    --moe-router-enable-expert-bias
    --moe-layer-freq 1
    --first-k-dense-replace 0
)

OPTIMIZE_ARGS=(
    --bf16
    --use-flash-attn
    --use-fused-rmsnorm
    --use-fused-swiglu
    --use-fused-rotary-pos-emb
    --no-masked-softmax-fusion
    --attention-softmax-in-fp32
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
    --recompute-granularity full
    --recompute-method uniform
    --recompute-num-layers 1
    --swap-optimizer
    --moe-token-dispatcher-type alltoall
    --moe-permutation-async-comm
    --moe-alltoall-overlap-comm
    --moe-grouped-gemm
    --moe-router-dtype fp32
    --moe-aux-loss-coeff 0.001
    --seq-aux
    --moe-router-load-balancing-type none
    --mtp-num-layers 1
    --mtp-loss-scaling-factor 0.3
)

TRAIN_ARGS=(
    --micro-batch-size 1
    --global-batch-size 128
    --train-iters 280
    --lr 3e-06
    --min-lr 3e-07
    --lr-decay-style cosine
    --lr-warmup-iters 10
    --weight-decay 0.01
    --adam-beta1 0.9
    --adam-beta2 0.999
    --clip-grad 1
    --init-method-std 0.02
    --attention-dropout 0.0
    --hidden-dropout 0.0
    --seed 42
)

DATA_ARGS=(
    --data-path "$DATA_PATH"
    --split 100,0,0
    --tokenizer-type PretrainedFromHF
    --tokenizer-name-or-path "$TOKENIZER_PATH"
)

OUTPUT_ARGS=(
    --load "$CKPT_LOAD_DIR"
    --save "$CKPT_SAVE_DIR"
    --finetune
    --no-load-optim
    --no-load-rng
    --log-interval 1
    --save-interval 280
    --eval-interval 280
    --eval-iters 0
    --distributed-backend nccl
    --distributed-timeout-minutes 120
    --ckpt-format torch
)

torchrun "${DISTRIBUTED_ARGS[@]}" pretrain_gpt.py "${LAYOUT_ARGS[@]}" "${MODEL_ARGS[@]}" "${OPTIMIZE_ARGS[@]}" "${TRAIN_ARGS[@]}" "${DATA_ARGS[@]}" "${OUTPUT_ARGS[@]}" \
    2>&1 | tee "$LOG_DIR/cpt-node-$NODE_RANK.log"
