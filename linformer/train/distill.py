"""Distillation of a finetuned full-attention classifier into a Linformer on the training core: ``distill(spec,
run_dir)``.

The teacher (``teacher_path``) is a sequence classifier finetuned with full attention: a BERT/RoBERTa-family
classifier, or a finetuning run of a converted model in full mode. The student is, by default, the teacher itself
with Linformer attention (``model.*``: k, sharing, length policy; only E and F start fresh, as window means), or
``student_path``: a Linformer of the same tokenizer (for example one finetuned after attention transfer), whose
classifier, if it has one, must have the teacher's labels.

The student fits the teacher on the task's training text, its labels unused (unlabeled text of the task is what
distillation needs): the loss is T^2 KL(softmax(teacher / T) || softmax(student / T)) per example, plus, with
``distill.hidden_weight`` > 0, that weight times each layer's relative error ||student - teacher||^2 / ||teacher||^2
at real tokens, averaged over layers. E and F learn at ``distill.lr_projections``, every other weight at
``trainer.lr``. Evaluation reports the student's task metrics and its agreement with the teacher's predictions;
results.json has finetuning's layout (a Table 2 row), with the teacher's metrics beside the student's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModelForSequenceClassification

from ..data.io import load_auto
from ..data.tasks import labels_match
from ..data.tokenizer import encoding_differences, load_tokenizer
from ..errors import ConfigError
from ..files.locations import resolve_path
from ..files.runs import MODEL_DIR
from ..modeling import LinformerForSequenceClassification
from ..modeling.card import card_path, conversion_info, read_card_info, results_entry, write_model_card
from ..modeling.configuration import ATTENTION_FIELDS
from ..modeling.convert import is_sequence_classifier, settings_named
from ..modeling.loading import load_classifier, load_pretrained, max_tokens, resolve_model_path
from ..modeling.reference import squared_relative_error
from ..runconfig import DistillSpec, TrainerSettings
from ..shell import hydra_override, imports_words, script_command
from .common import projection_param_groups
from .core import run_training
from .finetune import FinetuneTask
from .trainer import Trainer

log = logging.getLogger(__name__)


def check_teacher(teacher_path: str, label_names: tuple[str, ...], task: str, imports: Sequence[str] = ()) -> None:
    """ConfigError unless teacher_path holds a finetuned sequence classifier of the task's labels with full
    attention (read from its config, before any weights are loaded). A teacher whose labels are named (its
    id2label, as finetuning writes it) must name the task's: an SST-2 teacher has two labels as QNLI has, and a
    student distilled from it on QNLI would answer negative/positive. `imports`: the distill command's, carried into
    the finetuning command it prints (the task may be one of the user's own)."""
    num_labels = len(label_names)
    config = load_auto(AutoConfig, teacher_path)
    if not is_sequence_classifier(config):
        raise ConfigError(
            f"teacher_path={teacher_path} holds a {', '.join(config.architectures or [config.model_type])}, not a "
            f"finetuned sequence classifier: finetune it first "
            f"({script_command('finetune', f'task={task}', *imports_words(imports))} model_path=...) and distill "
            "from that run's best/."
        )
    if config.num_labels != num_labels:
        raise ConfigError(f"teacher_path={teacher_path} classifies {config.num_labels} labels, task={task} has "
                          f"{num_labels}: distill on the task the teacher was finetuned for.")
    named = [str(config.id2label[i]) for i in range(num_labels)] if config.id2label else []
    if named and not labels_match(named, label_names):
        raise ConfigError(f"teacher_path={teacher_path} classifies {named}, task={task}'s labels are "
                          f"{list(label_names)}: distill on the task the teacher was finetuned for.")
    if getattr(config, "attention", "full") != "full":
        raise ConfigError(f"teacher_path={teacher_path} is a Linformer with projected attention "
                          f"({config.attention_label}): the teacher must attend fully.")


def load_teacher(teacher_path: str, n: int | None = None):
    """The teacher classifier, frozen; with n above what it reads, lengthened to n tokens in full attention (a
    BERT/RoBERTa-family classifier converted, head included; its learned positions copied, Longformer's recipe)."""
    config = load_auto(AutoConfig, teacher_path)
    if n is None or max_tokens(config, load_tokenizer(teacher_path, "teacher_path"), None, None) >= n:
        model = load_pretrained(AutoModelForSequenceClassification, teacher_path, "teacher_path")
    else:
        model = LinformerForSequenceClassification.from_pretrained_encoder(teacher_path, attention="full",
                                                                           max_seq_len=n)
    return model.eval().requires_grad_(False)


def student_from_teacher(teacher_path: str, settings: dict):
    """The teacher's weights (encoder and classifier, converted from a BERT/RoBERTa-family classifier or kept from
    a Linformer's) with Linformer attention set by ``settings``; E and F fresh."""
    return LinformerForSequenceClassification.from_pretrained_encoder(teacher_path, **settings, attention="linformer")


def check_same_tokenization(teacher_tokenizer, student_tokenizer, teacher: str, student: str) -> None:
    """ConfigError unless both tokenizers give every text the same ids (the student's tokenizer feeds the teacher):
    the same vocabulary, and the same normalisation, pre-tokenizer, added tokens and special-token template
    (``encoding_differences``). `teacher` and `student` name each as its key gives it (``teacher_path=...``)."""
    differences = encoding_differences(teacher_tokenizer, student_tokenizer)
    if differences:
        raise ConfigError(f"{student} has another tokenizer than {teacher} ({'; '.join(differences)}): the student "
                          "must read the teacher's token ids, so it needs the teacher's tokenizer.")


class DistillTask(FinetuneTask):
    stage = "distill"
    select_best = False  # the student is the last model: evaluations report, they do not select
    min_tokens_key = "distill.min_tokens"

    def __init__(self, run: DistillSpec, settings: TrainerSettings, world: int, rank: int,
                 run_dir: Path | None = None):
        d = run.distill
        self.temperature, self.hidden_weight, self.lr_projections = d.temperature, d.hidden_weight, d.lr_projections
        self.teacher_name, self.student_name = run.teacher_path, run.student_path  # as given: the card names them
        self.student_dir: str | None = None  # student_path's model directory (load_model)
        # the command's imports=, carried into the commands its refusals print (its task, projection or sharing mode
        # may be the user's own, which the teacher's conversion or finetuning names too)
        self.imports = list(run.config.get("imports") or [])
        self.teacher_path = resolve_model_path(run.teacher_path, "teacher_path")
        super().__init__(run, settings, world, rank, run_dir)  # the student (load_model), the task's data
        # the teacher follows a student lengthened from it (model.max_seq_len) when asked
        lengthen = run.student_path is None and d.lengthen_teacher and run.model.get("max_seq_len") is not None
        self.teacher = load_teacher(self.teacher_path, self.config.max_seq_len if lengthen else None)
        if lengthen and self.max_length < self.config.max_seq_len:
            log.warning("the student and teacher are lengthened to n = %d (model.max_seq_len), but the inputs are cut "
                        "to %d tokens (%s): the positions past them are not trained. Set trainer.max_length=%d to "
                        "distill on longer inputs.", self.config.max_seq_len, self.max_length,
                        "trainer.max_length" if run.trainer.max_length is not None else "task.max_length",
                        self.config.max_seq_len)
        if self.hidden_weight > 0 and _layers_shape(self.model) != _layers_shape(self.teacher):
            raise ConfigError(
                f"distill.hidden_weight={self.hidden_weight} matches the student's layers to the teacher's, but they "
                f"differ in shape (layers x hidden: {_layers_shape(self.model)} against {_layers_shape(self.teacher)}):"
                " use distill.hidden_weight=0."
            )
        teacher_n = max_tokens(self.teacher.config, self.tokenizer, None, None)
        if self.max_length > teacher_n:
            raise ConfigError(
                f"the student reads up to {self.max_length} tokens (trainer.max_length, model.max_seq_len) but the "
                f"teacher teacher_path={self.teacher_path} attends over at most {teacher_n}: the teacher must see what "
                f"the student sees. Lengthen the teacher to {self.max_length} tokens first (its positions copied: "
                f"{self._convert_teacher()} model.max_seq_len={self.max_length} out_dir=<dir>, or here with "
                f"distill.lengthen_teacher=true), or distill at trainer.max_length={teacher_n}."
            )
        self.teacher_predictions: dict[str, list[int]] = {}  # split -> the teacher's predictions
        self.teacher_scores: dict[str, dict[str, float]] = {}
        self.tracker_tags = [*self.tracker_tags, "distill"]

    def min_train_tokens(self, run: DistillSpec) -> int | None:
        return run.distill.min_tokens

    def type_vocab_sizes(self, run: DistillSpec) -> list[int | None]:
        """The student's and the teacher's: both read every batch, so a pair's segment ids go to both or neither."""
        return [*super().type_vocab_sizes(run), getattr(load_auto(AutoConfig, self.teacher_path),
                                                        "type_vocab_size", None)]

    def starts_from_scratch(self, run: DistillSpec) -> bool:
        return False  # a student starts from its teacher's weights, or student_path's

    def load_model(self, run: DistillSpec):
        """The student: the teacher's own Linformer twin (model.*), or student_path checked against the teacher's
        labels and vocabulary. The teacher is checked first, and loaded after (DistillTask.__init__)."""
        labels = self.task_spec.num_labels
        check_teacher(self.teacher_path, self.task_spec.label_names, self.task_spec.name, self.imports)
        teacher_tokenizer = load_tokenizer(self.teacher_path, "teacher_path")
        # the teacher's n as saved, before any lengthening (the card says when the run lengthened it)
        self.teacher_n = max_tokens(load_auto(AutoConfig, self.teacher_path), teacher_tokenizer, None, None)
        if run.student_path is None:
            # max_seq_len above the teacher's lengthens the student (its learned positions copied, as Longformer's),
            # for distilling long inputs from a teacher lengthened the same way
            settings = {k: v for k, v in run.model.items() if k in ATTENTION_FIELDS and v is not None}
            if "max_seq_len" in settings:
                self._check_lengthening(run, settings["max_seq_len"])
            with settings_named("model"):  # the config is built, and a bad setting said, before the weights load
                student = student_from_teacher(self.teacher_path, settings)
            if "max_seq_len" in settings:  # a lengthened student reads as far as its n (the tokenizer capped it)
                teacher_tokenizer.model_max_length = student.config.max_seq_len
            return self.teacher_path, teacher_tokenizer, student
        student_path = self.student_dir = resolve_model_path(run.student_path, "student_path")
        config = load_auto(AutoConfig, student_path)
        if getattr(config, "attention", None) != "linformer":
            raise ConfigError(f"student_path={student_path} has {getattr(config, 'attention', config.model_type)} "
                              "attention: the student is a Linformer (convert it with model.attention=linformer, or "
                              "leave student_path out to distil into the teacher's own Linformer twin)")
        if is_sequence_classifier(config) and config.num_labels != labels:
            raise ConfigError(f"student_path={student_path} classifies {config.num_labels} labels, "
                              f"teacher_path={self.teacher_path} {labels}: the student's "
                              "classifier must have the teacher's labels.")
        tokenizer = load_tokenizer(student_path, "student_path")
        check_same_tokenization(teacher_tokenizer, tokenizer, f"teacher_path={self.teacher_path}",
                                f"student_path={student_path}")
        model, _ = load_classifier(student_path, self.task_spec.label_names, False, self.task_spec.name,
                                   key="student_path")
        return student_path, tokenizer, model

    def _check_lengthening(self, run: DistillSpec, n: int) -> None:
        """A student lengthened past what the teacher reads (model.max_seq_len) is distilled at its n only where the
        teacher is lengthened too (distill.lengthen_teacher); without trainer.max_length the task's default length
        capped the inputs at what the teacher reads, and the student's n went untrained without a word. ConfigError
        then; trainer.max_length given asks for that length (the training core checks the teacher reads it)."""
        teacher_n = self.teacher_n
        if n <= teacher_n or run.distill.lengthen_teacher or run.trainer.max_length is not None:
            return
        raise ConfigError(
            f"model.max_seq_len={n} lengthens the student past what the teacher teacher_path={self.teacher_path} "
            f"reads ({teacher_n} tokens), and distill.lengthen_teacher=false: the teacher must read that far already. "
            f"Lengthen it here (distill.lengthen_teacher=true trainer.max_length={n}) or first ("
            f"{self._convert_teacher()} model.attention=full model.max_seq_len={n} out_dir=<dir>), or distill the "
            f"longer student on what the teacher reads (trainer.max_length={teacher_n})."
        )

    def _convert_teacher(self) -> str:
        """The convert command of the teacher, with the command's imports, for a refusal to complete."""
        return script_command("convert", hydra_override("model_path", self.teacher_path), *imports_words(self.imports))

    def param_groups(self, weight_decay: float) -> list[dict]:
        """E and F at distill.lr_projections (null: trainer.lr), every other weight at trainer.lr."""
        return projection_param_groups(self.model, weight_decay, lr_projections=self.lr_projections)

    def loss(self, model, batch) -> torch.Tensor:
        inputs = {k: v for k, v in batch.items() if k != "labels"}  # the teacher labels the text
        hidden = self.hidden_weight > 0
        with torch.no_grad():
            teacher = self.teacher(**inputs, output_hidden_states=hidden)
        student = model(**inputs, output_hidden_states=hidden)
        t = self.temperature
        loss = F.kl_div(F.log_softmax(student.logits.float() / t, -1), F.log_softmax(teacher.logits.float() / t, -1),
                        log_target=True, reduction="batchmean") * t * t
        if hidden:
            mask = inputs["attention_mask"]
            errs = [squared_relative_error(s, h, mask)
                    for s, h in zip(student.hidden_states[1:], teacher.hidden_states[1:])]
            loss = loss + self.hidden_weight * torch.stack(errs).mean()
        return loss

    @torch.no_grad()
    def score(self, model, acc, split: str) -> dict[str, float]:
        """The student's task metrics on `split`, and ``agreement``: the share of its examples where the student's
        prediction is the teacher's (the teacher is scored once per split, on first use)."""
        if split not in self.teacher_predictions:
            self.teacher_scores[split] = super().score(self.teacher, acc, split)
            self.teacher.eval()  # score() leaves the model it was given in train mode
            self.teacher_predictions[split] = self.last_eval[0]
        scores = super().score(model, acc, split)
        teacher = self.teacher_predictions[split]
        same = sum(p == q for p, q in zip(self.last_eval[0], teacher))
        return scores | {"agreement": same / max(len(teacher), 1)}

    def keep_results(self, trainer: Trainer, results: dict) -> None:
        """The student is a new model: it is saved in <run>/model with a card naming the teacher and the run."""
        model_dir = trainer.run_dir / MODEL_DIR
        trainer.save_model(model_dir)
        if not trainer.is_main:
            return
        model = trainer.accelerator.unwrap_model(trainer.model)
        info = conversion_info(self.teacher_name, model, name=trainer.run_dir.name)
        info["model"]["new_head"] = False  # the student's classifier learnt the teacher's predictions
        if self.student_dir is not None:  # a given student's E and F are its own, and so is what fitted them
            info["model"]["projections"] = "kept"
            info["transfer"] = read_card_info(self.student_dir).get("transfer")
        info["distillation"] = {"task": self.task_spec.name, "teacher": card_path(self.teacher_name),
                                "steps": trainer.state["step"],
                                "max_length": self.max_length, "min_tokens": self.min_tokens,
                                "text_cleaning": self.task_spec.text_cleaning,
                                "text_fields": list(self.task_spec.text_fields),
                                "teacher_max_seq_len": int(max_tokens(self.teacher.config, self.tokenizer, None, None)),
                                "teacher_saved_max_seq_len": self.teacher_n,
                                "examples": self.examples_seen(trainer.state["step"]),
                                "temperature": self.temperature, "hidden_weight": self.hidden_weight,
                                "student_path": card_path(self.student_name),
                                "teacher_metrics": self._teacher_metrics()}
        info["results"] = results_entry(results, trainer.run_dir)
        write_model_card(model_dir, info)

    def _teacher_metrics(self) -> dict[str, float]:
        """The teacher's metrics on the reported split."""
        return self.teacher_scores.get("eval", {})

    def finish(self, trainer: Trainer) -> tuple[dict[str, Any], dict[str, Any]]:
        summary, results = super().finish(trainer)
        model_dir = str(trainer.run_dir / MODEL_DIR)
        metric = self.task_spec.metrics[0]
        teacher = self._teacher_metrics()
        results |= {"model_path": model_dir, "method": "distill", "teacher_path": self.teacher_path,
                    "teacher_metrics": teacher, "student_path": self.student_name,
                    "distill": {"temperature": self.temperature, "hidden_weight": self.hidden_weight,
                                "lr_projections": self.lr_projections, "min_tokens": self.min_tokens}}
        summary |= {"model_dir": model_dir, "next": None}  # the student is saved: nothing to export
        agreement = results["metrics"].get("agreement")
        if metric in teacher and agreement is not None:
            summary["report"].append(f"teacher {metric} {teacher[metric]:.4f} on the same examples; the student "
                                     f"agrees with it on {agreement:.1%}")
        return summary, results


def _layers_shape(model) -> tuple[int, int]:
    return int(model.config.num_hidden_layers), int(model.config.hidden_size)


def distill(spec: DistillSpec | Mapping, run_dir: str | Path) -> dict:
    """Distill the spec's teacher_path into a Linformer on its task's text; returns results.json's content. `spec`
    may be a composed configs/distill.yaml, read into the spec first."""
    spec = DistillSpec.of(spec)

    def make_task(accelerator, settings: TrainerSettings) -> DistillTask:
        with accelerator.main_process_first():  # rank 0 tokenizes and saves the task cache, the others then load it
            task = DistillTask(spec, settings, accelerator.num_processes, accelerator.process_index,
                              Path(resolve_path(run_dir)))  # as run_training takes it
        task.teacher.to(accelerator.device)  # not prepared by Accelerate (it never trains): placed by hand
        return task

    return run_training(spec, run_dir, make_task)
