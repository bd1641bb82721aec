# Vendored unchanged but for this header (lint and format off below): the scoring functions of
# EmoBench-M's official evaluation script, so that test_emobench_m_scoring.py runs THEIR scorer beside ours.
#   repository: https://github.com/Emo-gml/EmoBench-M
#   path:       EmoBench-M_eval.py (functions evaluate_classification and evaluate_joint, lines 39-97, and
#               evaluate_generation, lines 102-126)
#   commit:     8916147171a58ea2cf2164de5044adb4c04b523e (2025-10-20)
#   licence:    Apache License 2.0 (the repository's LICENSE.txt); Copyright the EmoBench-M authors.
# Only the imports these functions need are kept.  `bert_score` is their import but for its fallback: BERTScore needs
# roberta-large's weights, which this machine cannot download, so without them the tests hand evaluate_generation a
# stand-in and compare only its BLEU and ROUGE-L (test_emobench_m_scoring.py).
# ruff: noqa
# fmt: off
import os
import json
import argparse
from typing import List
from sklearn.metrics import accuracy_score, precision_score, recall_score, f1_score
from nltk.translate.bleu_score import sentence_bleu
from rouge_score import rouge_scorer
try:
    from bert_score import score as bert_score
except ImportError:  # not in their script: bert-score is not a dependency of ours (see the header)
    bert_score = None

# ------------------------
# Classification Evaluation
# ------------------------
def evaluate_classification(json_paths: List[str], output_metrics: str) -> None:
    targets, preds = [], []
    for path in json_paths:
        with open(path, 'r', encoding='utf-8') as f:
            data = json.load(f)
        for sample in data:
            exp = sample.get('expected_value', '').strip().lower()
            pre = sample.get('predicted_value', '').strip().lower()
            if exp and pre:
                targets.append(exp)
                preds.append(pre)
    if targets:
        metrics = {
            'accuracy': accuracy_score(targets, preds),
            'precision': precision_score(targets, preds, average='weighted', zero_division=0),
            'recall': recall_score(targets, preds, average='weighted', zero_division=0),
            'f1_score': f1_score(targets, preds, average='weighted', zero_division=0)
        }
        with open(output_metrics, 'w', encoding='utf-8') as f:
            json.dump(metrics, f, ensure_ascii=False, indent=2)
        print(f"[classification] Metrics saved to: {output_metrics}")
    else:
        print("[classification] No valid samples.")

# ------------------------
# Joint Emotion + Intent Evaluation
# ------------------------
def evaluate_joint(json_path: str, output_metrics: str) -> None:
    true_e, pred_e, true_i, pred_i = [], [], [], []
    with open(json_path, 'r', encoding='utf-8') as f:
        data = json.load(f)
    for s in data:
        te = s.get('expected_emotion', '').strip().lower()
        pe = s.get('predicted_emotion', '').strip().lower()
        ti = s.get('expected_intent', '').strip().lower()
        pi = s.get('predicted_intent', '').strip().lower()
        if te and pe and ti and pi:
            true_e.append(te)
            pred_e.append(pe)
            true_i.append(ti)
            pred_i.append(pi)
    joint_true = [f"{e}_{i}" for e, i in zip(true_e, true_i)]
    joint_pred = [f"{e}_{i}" for e, i in zip(pred_e, pred_i)]
    if joint_true:
        metrics = {
            'joint_accuracy': accuracy_score(joint_true, joint_pred),
            'joint_precision': precision_score(joint_true, joint_pred, average='weighted', zero_division=0),
            'joint_recall': recall_score(joint_true, joint_pred, average='weighted', zero_division=0),
            'joint_f1': f1_score(joint_true, joint_pred, average='weighted', zero_division=0),
            'total': len(joint_true)
        }
        with open(output_metrics, 'w', encoding='utf-8') as f:
            json.dump(metrics, f, ensure_ascii=False, indent=2)
        print(f"[joint] Metrics saved to: {output_metrics}")
    else:
        print("[joint] No valid samples.")

# ------------------------
# Generation Evaluation
# ------------------------
def evaluate_generation(json_file: str, output_metrics: str) -> None:
    data = json.load(open(json_file, 'r', encoding='utf-8'))
    scorer = rouge_scorer.RougeScorer(['rougeL'], use_stemmer=True)
    bleu_list, rouge_list, bert_list = [], [], []
    for s in data:
        pred = s.get('prediction', '').strip()
        ref = s.get('reference', '').strip()
        if not pred or not ref:
            continue
        bleu_val = sentence_bleu([ref.split()], pred.split())
        rouge_val = scorer.score(ref, pred)['rougeL'].fmeasure
        _, _, F = bert_score([pred], [ref], lang='en')
        bert_val = F.mean().item()
        bleu_list.append(bleu_val)
        rouge_list.append(rouge_val)
        bert_list.append(bert_val)
    metrics = {
        'avg_bleu': sum(bleu_list) / len(bleu_list) if bleu_list else 0,
        'avg_rouge': sum(rouge_list) / len(rouge_list) if rouge_list else 0,
        'avg_bert': sum(bert_list) / len(bert_list) if bert_list else 0,
        'total': len(bleu_list)
    }
    with open(output_metrics, 'w', encoding='utf-8') as f:
        json.dump(metrics, f, ensure_ascii=False, indent=2)
    print(f"[generation] Metrics saved to: {output_metrics}")
