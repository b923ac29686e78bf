"""torchvision's augmentation transform classes: RandomRotation, RandomAffine, RandomPerspective, RandomErasing,
GaussianBlur, ElasticTransform, FiveCrop, TenCrop, LinearTransformation, RandomInvert, RandomPosterize,
RandomSolarize, RandomAdjustSharpness, RandomAutocontrast, RandomEqualize.

Arguments, checks and ``get_params`` static methods (with torch's signatures) are torchvision's; random draws
come from ember's data streams (a DataLoader worker's own stream, else the default generator), so
``ember.manual_seed`` makes them repeatable. Re-exported by ``ember.vision.transforms``.

Example:
    >>> import ember
    >>> import ember.vision.transforms as T
    >>> t = T.Compose([T.RandomRotation(15), T.RandomErasing(p=1.0)])
    >>> t(ember.rand(3, 32, 32)).shape
    ember.Size([3, 32, 32])
"""
from __future__ import annotations

import math
import numbers
import warnings
from typing import Any, Sequence

import numpy as np

import ember
from ember.vision.transforms import _draws as draws, functional as F
from ember.vision.transforms._image import is_tensor
from ember.data._transform_module import TransformModule
from ember.vision.transforms.functional import InterpolationMode

__all__ = ["RandomRotation", "RandomAffine", "RandomPerspective", "RandomErasing", "GaussianBlur", "ElasticTransform",
           "FiveCrop", "TenCrop", "LinearTransformation", "RandomInvert", "RandomPosterize", "RandomSolarize",
           "RandomAdjustSharpness", "RandomAutocontrast", "RandomEqualize"]


def _interpolation_mode(interpolation: Any) -> Any:
    """PIL's integer codes become InterpolationMode members, as torchvision converts them."""
    if isinstance(interpolation, int) and not isinstance(interpolation, bool):
        names = {0: "NEAREST", 1: "LANCZOS", 2: "BILINEAR", 3: "BICUBIC", 4: "BOX", 5: "HAMMING"}
        return InterpolationMode[names[interpolation]]
    return interpolation


def _check_fill(fill: Any) -> Any:
    if fill is None:
        return 0
    if not isinstance(fill, (Sequence, numbers.Number)):
        raise TypeError("Fill should be either a sequence or a number.")
    return fill


def _fill_for(img: Any, fill: Any) -> Any:
    """Tensors (and NumPy images) get one float per channel; PIL images take the fill as given."""
    if is_tensor(img) or isinstance(img, np.ndarray):
        channels = F.get_dimensions(img)[0]
        return [float(fill)] * channels if isinstance(fill, (int, float)) else [float(f) for f in fill]
    return fill


def _check_sequence_input(x: Any, name: str, req_sizes: Sequence[int]) -> None:
    msg = req_sizes[0] if len(req_sizes) < 2 else " or ".join(str(s) for s in req_sizes)
    if not isinstance(x, Sequence):
        raise TypeError(f"{name} should be a sequence of length {msg}.")
    if len(x) not in req_sizes:
        raise ValueError(f"{name} should be a sequence of length {msg}.")


def _setup_angle(x: Any, name: str, req_sizes: Sequence[int] = (2,)) -> list[float]:
    if isinstance(x, numbers.Number):
        if x < 0:
            raise ValueError(f"If {name} is a single number, it must be positive.")
        x = [-x, x]
    else:
        _check_sequence_input(x, name, req_sizes)
    return [float(d) for d in x]


def _setup_size(size: Any, error_msg: str) -> tuple[int, int]:
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    if isinstance(size, Sequence) and len(size) == 1:
        return size[0], size[0]
    if len(size) != 2:
        raise ValueError(error_msg)
    return tuple(size)


class _Transform(TransformModule):  # torchvision's are nn.Modules (ember/data/_transform_module.py)
    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_") and k != "training")
        return f"{type(self).__name__}({args})"


class RandomRotation(_Transform):
    """Rotate by an angle drawn uniformly from ``degrees`` (a number ``d`` means ``[-d, d]``)."""

    def __init__(self, degrees: Any, interpolation: Any = InterpolationMode.NEAREST, expand: bool = False,
                 center: Sequence[int] | None = None, fill: Any = 0) -> None:
        self.degrees = _setup_angle(degrees, name="degrees", req_sizes=(2,))
        if center is not None:
            _check_sequence_input(center, "center", req_sizes=(2,))
        self.center = center
        self.interpolation = _interpolation_mode(interpolation)
        self.expand = expand
        self.fill = _check_fill(fill)

    @staticmethod
    def get_params(degrees: list[float]) -> float:
        return draws.uniform(float(degrees[0]), float(degrees[1]))

    def __call__(self, img: Any) -> Any:
        angle = self.get_params(self.degrees)
        return F.rotate(img, angle, self.interpolation, self.expand, self.center, _fill_for(img, self.fill))


class RandomAffine(_Transform):
    """Random rotation, translation (fractions of the size), scale and shear (degrees), torchvision's ranges."""

    def __init__(self, degrees: Any, translate: Sequence[float] | None = None, scale: Sequence[float] | None = None,
                 shear: Any = None, interpolation: Any = InterpolationMode.NEAREST, fill: Any = 0,
                 center: Sequence[int] | None = None) -> None:
        self.degrees = _setup_angle(degrees, name="degrees", req_sizes=(2,))
        if translate is not None:
            _check_sequence_input(translate, "translate", req_sizes=(2,))
            for t in translate:
                if not 0.0 <= t <= 1.0:
                    raise ValueError("translation values should be between 0 and 1")
        self.translate = translate
        if scale is not None:
            _check_sequence_input(scale, "scale", req_sizes=(2,))
            for s in scale:
                if s <= 0:
                    raise ValueError("scale values should be positive")
        self.scale = scale
        self.shear = _setup_angle(shear, name="shear", req_sizes=(2, 4)) if shear is not None else None
        self.interpolation = _interpolation_mode(interpolation)
        self.fill = _check_fill(fill)
        if center is not None:
            _check_sequence_input(center, "center", req_sizes=(2,))
        self.center = center

    @staticmethod
    def get_params(degrees: list[float], translate: list[float] | None, scale_ranges: list[float] | None,
                   shears: list[float] | None, img_size: list[int]) -> tuple[float, tuple[int, int], float,
                                                                            tuple[float, float]]:
        """(angle, (tx, ty) in pixels, scale, (shear_x, shear_y)); ``img_size`` is [width, height]."""
        angle = draws.uniform(float(degrees[0]), float(degrees[1]))
        if translate is not None:
            max_dx, max_dy = float(translate[0] * img_size[0]), float(translate[1] * img_size[1])
            tx = int(round(draws.uniform(-max_dx, max_dx)))
            translations = (tx, int(round(draws.uniform(-max_dy, max_dy))))
        else:
            translations = (0, 0)
        scale = draws.uniform(scale_ranges[0], scale_ranges[1]) if scale_ranges is not None else 1.0
        shear_x = shear_y = 0.0
        if shears is not None:
            shear_x = draws.uniform(shears[0], shears[1])
            if len(shears) == 4:
                shear_y = draws.uniform(shears[2], shears[3])
        return angle, translations, scale, (shear_x, shear_y)

    def __call__(self, img: Any) -> Any:
        _, height, width = F.get_dimensions(img)
        angle, translations, scale, shear = self.get_params(self.degrees, self.translate, self.scale, self.shear,
                                                            [width, height])
        return F.affine(img, angle, list(translations), scale, list(shear), interpolation=self.interpolation,
                        fill=_fill_for(img, self.fill), center=self.center)


class RandomPerspective(_Transform):
    """With probability ``p``, move each corner inwards by up to ``distortion_scale`` of half the size."""

    def __init__(self, distortion_scale: float = 0.5, p: float = 0.5, interpolation: Any = InterpolationMode.BILINEAR,
                 fill: Any = 0) -> None:
        self.p = p
        self.interpolation = _interpolation_mode(interpolation)
        self.distortion_scale = distortion_scale
        self.fill = _check_fill(fill)

    @staticmethod
    def get_params(width: int, height: int, distortion_scale: float) -> tuple[list[list[int]], list[list[int]]]:
        """(startpoints, endpoints): the image corners and their randomly moved places (tl, tr, br, bl)."""
        half_height, half_width = height // 2, width // 2
        dx, dy = int(distortion_scale * half_width), int(distortion_scale * half_height)
        draw = draws.randint

        topleft = [draw(0, dx + 1), draw(0, dy + 1)]
        topright = [draw(width - dx - 1, width), draw(0, dy + 1)]
        botright = [draw(width - dx - 1, width), draw(height - dy - 1, height)]
        botleft = [draw(0, dx + 1), draw(height - dy - 1, height)]
        startpoints = [[0, 0], [width - 1, 0], [width - 1, height - 1], [0, height - 1]]
        return startpoints, [topleft, topright, botright, botleft]

    def __call__(self, img: Any) -> Any:
        _, height, width = F.get_dimensions(img)
        if draws.below(self.p):
            startpoints, endpoints = self.get_params(width, height, self.distortion_scale)
            return F.perspective(img, startpoints, endpoints, self.interpolation, _fill_for(img, self.fill))
        return img


class RandomErasing(_Transform):
    """With probability ``p``, overwrite a random rectangle (``scale`` of the area, aspect ``ratio``) of a tensor
    image with ``value`` (a number, one per channel, or ``"random"``: standard-normal noise)."""

    def __init__(self, p: float = 0.5, scale: Sequence[float] = (0.02, 0.33), ratio: Sequence[float] = (0.3, 3.3),
                 value: Any = 0, inplace: bool = False) -> None:
        if not isinstance(value, (numbers.Number, str, tuple, list)):
            raise TypeError("Argument value should be either a number or str or a sequence")
        if isinstance(value, str) and value != "random":
            raise ValueError("If value is str, it should be 'random'")
        if not isinstance(scale, Sequence):
            raise TypeError("Scale should be a sequence")
        if not isinstance(ratio, Sequence):
            raise TypeError("Ratio should be a sequence")
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            warnings.warn("Scale and ratio should be of kind (min, max)")
        if scale[0] < 0 or scale[1] > 1:
            raise ValueError("Scale should be between 0 and 1")
        if p < 0 or p > 1:
            raise ValueError("Random erasing probability should be between 0 and 1")
        self.p = p
        self.scale = scale
        self.ratio = ratio
        self.value = value
        self.inplace = inplace

    @staticmethod
    def get_params(img: Any, scale: Sequence[float], ratio: Sequence[float],
                   value: list[float] | None = None) -> tuple[int, int, int, int, Any]:
        """(i, j, h, w, v): the rectangle and its contents; ten tries, else the whole image unchanged."""
        img_c, img_h, img_w = img.shape[-3], img.shape[-2], img.shape[-1]
        area = img_h * img_w
        for _ in range(10):
            erase_area = area * draws.uniform(scale[0], scale[1])
            aspect_ratio = draws.log_uniform(ratio)
            h = int(round(math.sqrt(erase_area * aspect_ratio)))
            w = int(round(math.sqrt(erase_area / aspect_ratio)))
            if not (h < img_h and w < img_w):
                continue
            if value is None:
                v = ember.from_numpy(draws.normal((img_c, h, w)))
            else:
                v = ember.tensor(value)[:, None, None]
            i = draws.randint(0, img_h - h + 1)
            return i, draws.randint(0, img_w - w + 1), h, w, v
        return 0, 0, img_h, img_w, img

    def __call__(self, img: Any) -> Any:
        if not draws.below(self.p):
            return img
        if isinstance(self.value, (int, float)):
            value = [float(self.value)]
        elif isinstance(self.value, str):
            value = None
        else:
            value = [float(v) for v in self.value]
        channels = img.shape[-3] if is_tensor(img) else F.get_dimensions(img)[0]
        if value is not None and len(value) not in (1, channels):
            raise ValueError(f"If value is a sequence, it should have either a single value or {channels} (number "
                             "of input channels)")
        if is_tensor(img):
            x, y, h, w, v = self.get_params(img, scale=self.scale, ratio=self.ratio, value=value)
            return F.erase(img, x, y, h, w, v, self.inplace)
        chw = ember.from_numpy(np.ascontiguousarray(np.moveaxis(np.asarray(img), -1, 0)))  # NumPy HWC image
        x, y, h, w, v = self.get_params(chw, scale=self.scale, ratio=self.ratio, value=value)
        return np.moveaxis(F.erase(chw, x, y, h, w, v).numpy(), 0, -1)


class GaussianBlur(_Transform):
    """Gaussian blur with ``kernel_size`` and a sigma drawn uniformly from ``sigma`` (min, max)."""

    def __init__(self, kernel_size: Any, sigma: Any = (0.1, 2.0)) -> None:
        self.kernel_size = _setup_size(kernel_size, "Kernel size should be a tuple/list of two integers")
        for ks in self.kernel_size:
            if ks <= 0 or ks % 2 == 0:
                raise ValueError("Kernel size value should be an odd and positive number.")
        if isinstance(sigma, numbers.Number):
            if sigma <= 0:
                raise ValueError("If sigma is a single number, it must be positive.")
            sigma = (sigma, sigma)
        elif isinstance(sigma, Sequence) and len(sigma) == 2:
            if not 0.0 < sigma[0] <= sigma[1]:
                raise ValueError("sigma values should be positive and of the form (min, max).")
        else:
            raise ValueError("sigma should be a single number or a list/tuple with length 2.")
        self.sigma = sigma

    @staticmethod
    def get_params(sigma_min: float, sigma_max: float) -> float:
        return draws.uniform(sigma_min, sigma_max)

    def __call__(self, img: Any) -> Any:
        sigma = self.get_params(self.sigma[0], self.sigma[1])
        return F.gaussian_blur(img, list(self.kernel_size), [sigma, sigma])


class ElasticTransform(_Transform):
    """Displace pixels by smooth random fields (uniform noise blurred with ``sigma``, scaled by ``alpha``)."""

    def __init__(self, alpha: Any = 50.0, sigma: Any = 5.0, interpolation: Any = InterpolationMode.BILINEAR,
                 fill: Any = 0) -> None:
        self.alpha = self._pair(alpha, "alpha")
        self.sigma = self._pair(sigma, "sigma")
        self.interpolation = _interpolation_mode(interpolation)
        if isinstance(fill, (int, float)):
            fill = [float(fill)]
        elif isinstance(fill, (list, tuple)):
            fill = [float(f) for f in fill]
        else:
            raise TypeError(f"fill should be int or float or a list or tuple of them. Got {type(fill)}")
        self.fill = fill

    @staticmethod
    def _pair(value: Any, name: str) -> list[float]:
        if not isinstance(value, (float, Sequence)):
            raise TypeError(f"{name} should be float or a sequence of floats. Got {type(value)}")
        if isinstance(value, Sequence):
            if len(value) != 2:
                raise ValueError(f"If {name} is a sequence its length should be 2. Got {len(value)}")
            for element in value:
                if not isinstance(element, float):
                    raise TypeError(f"{name} should be a sequence of floats. Got {type(element)}")
            return [value[0], value[1]]
        return [float(value), float(value)]

    @staticmethod
    def get_params(alpha: list[float], sigma: list[float], size: list[int]) -> Any:
        """A ``[1, H, W, 2]`` displacement: per axis, uniform noise in [-1, 1], blurred with a ``8 sigma + 1`` kernel
        (odd), times ``alpha`` divided by the size along that axis."""
        fields = []
        for axis, divisor in ((0, size[1]), (1, size[0])):
            field = draws.uniform_array((1, 1) + tuple(size)) * np.float32(2) - np.float32(1)
            if sigma[axis] > 0.0:
                k = int(8 * sigma[axis] + 1)
                k += 1 - k % 2
                field = F.gaussian_blur(ember.from_numpy(field), [k, k], list(sigma)).numpy()
            fields.append(field * np.float32(alpha[axis]) / np.float32(divisor))
        return ember.from_numpy(np.ascontiguousarray(np.concatenate(fields, axis=1).transpose(0, 2, 3, 1)))

    def __call__(self, img: Any) -> Any:
        _, height, width = F.get_dimensions(img)
        displacement = self.get_params(self.alpha, self.sigma, [height, width])
        return F.elastic_transform(img, displacement, self.interpolation, self.fill)


class FiveCrop(_Transform):
    """The four corner crops and the centre crop (a tuple of five images)."""

    def __init__(self, size: Any) -> None:
        self.size = _setup_size(size, error_msg="Please provide only two dimensions (h, w) for size.")

    def __call__(self, img: Any) -> tuple:
        return F.five_crop(img, self.size)


class TenCrop(_Transform):
    """``FiveCrop`` of the image and of its mirror (horizontal, or vertical with ``vertical_flip``)."""

    def __init__(self, size: Any, vertical_flip: bool = False) -> None:
        self.size = _setup_size(size, error_msg="Please provide only two dimensions (h, w) for size.")
        self.vertical_flip = vertical_flip

    def __call__(self, img: Any) -> tuple:
        return F.ten_crop(img, self.size, self.vertical_flip)


class LinearTransformation(_Transform):
    """Flatten ``[..., C, H, W]``, subtract ``mean_vector``, multiply by ``transformation_matrix`` (e.g. ZCA
    whitening) and restore the shape."""

    def __init__(self, transformation_matrix: Any, mean_vector: Any) -> None:
        if transformation_matrix.size(0) != transformation_matrix.size(1):
            raise ValueError(f"transformation_matrix should be square. Got {tuple(transformation_matrix.size())} "
                             "rectangular matrix.")
        if mean_vector.size(0) != transformation_matrix.size(0):
            raise ValueError(f"mean_vector should have the same length {mean_vector.size(0)} as any one of the "
                             f"dimensions of the transformation_matrix [{tuple(transformation_matrix.size())}]")
        if transformation_matrix.device != mean_vector.device:
            raise ValueError(f"Input tensors should be on the same device. Got {transformation_matrix.device} and "
                             f"{mean_vector.device}")
        if transformation_matrix.dtype != mean_vector.dtype:
            raise ValueError(f"Input tensors should have the same dtype. Got {transformation_matrix.dtype} and "
                             f"{mean_vector.dtype}")
        self.transformation_matrix = transformation_matrix
        self.mean_vector = mean_vector

    def __call__(self, tensor: Any) -> Any:
        shape = tensor.shape
        n = shape[-3] * shape[-2] * shape[-1]
        if n != self.transformation_matrix.shape[0]:
            raise ValueError("Input tensor and transformation matrix have incompatible shape."
                             f"[{shape[-3]} x {shape[-2]} x {shape[-1]}] != {self.transformation_matrix.shape[0]}")
        if tensor.device.type != self.mean_vector.device.type:
            raise ValueError("Input tensor should be on the same device as transformation matrix and mean vector. "
                             f"Got {tensor.device} vs {self.mean_vector.device}")
        flat = tensor.reshape(-1, n) - self.mean_vector
        return ember.mm(flat, self.transformation_matrix.to(flat.dtype)).reshape(shape)


class _RandomApplyOne(_Transform):
    """Apply ``_apply`` with probability ``p`` (torchvision: ``torch.rand(1) < p``)."""

    def __init__(self, p: float = 0.5) -> None:
        self.p = p

    def _apply(self, img: Any) -> Any:
        raise NotImplementedError

    def __call__(self, img: Any) -> Any:
        return self._apply(img) if draws.rand() < self.p else img  # torch.rand(1).item() < p


class RandomInvert(_RandomApplyOne):
    def _apply(self, img: Any) -> Any:
        return F.invert(img)


class RandomAutocontrast(_RandomApplyOne):
    def _apply(self, img: Any) -> Any:
        return F.autocontrast(img)


class RandomEqualize(_RandomApplyOne):
    def _apply(self, img: Any) -> Any:
        return F.equalize(img)


class RandomPosterize(_RandomApplyOne):
    def __init__(self, bits: int, p: float = 0.5) -> None:
        super().__init__(p)
        self.bits = bits

    def _apply(self, img: Any) -> Any:
        return F.posterize(img, self.bits)


class RandomSolarize(_RandomApplyOne):
    def __init__(self, threshold: float, p: float = 0.5) -> None:
        super().__init__(p)
        self.threshold = threshold

    def _apply(self, img: Any) -> Any:
        return F.solarize(img, self.threshold)


class RandomAdjustSharpness(_RandomApplyOne):
    def __init__(self, sharpness_factor: float, p: float = 0.5) -> None:
        super().__init__(p)
        self.sharpness_factor = sharpness_factor

    def _apply(self, img: Any) -> Any:
        return F.adjust_sharpness(img, self.sharpness_factor)
